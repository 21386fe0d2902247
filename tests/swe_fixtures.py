"""Fixtures and helpers shared by the SWE test packages (`tests/swe`, `tests/repair`): their conftests import
them, so package-scoped fixtures stay scoped to each package."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "swe-tasks"
TASKS_FILE = EXAMPLES / "tasks.jsonl"
GOLD_FILE = EXAMPLES / "gold.jsonl"


# package scope: a session-scoped autouse fixture would stay active for the other test folders too
@pytest.fixture(scope="package", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Task repositories are built into a cache; keep the tests' cache out of the user's."""
    old = os.environ.get("AGENTFLOW_CACHE_DIR")
    os.environ["AGENTFLOW_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("AGENTFLOW_CACHE_DIR", None)
    else:
        os.environ["AGENTFLOW_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def docker_image() -> str:
    """The sandbox image (built offline if missing); the test is skipped where Docker does not answer."""
    from agentflow.errors import UserError
    from agentflow.sandbox.docker import docker_client

    try:
        docker_client()
    except UserError as exc:
        pytest.skip(f"Docker is not available: {exc}")
    from agentflow.sandbox.image import ensure_image

    return ensure_image()


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def kill_9_when(proc: subprocess.Popen[Any], ready: Callable[[], bool], *, timeout: float, what: str) -> None:
    """SIGKILL `proc` (a bench or repair run) as soon as `ready()` holds, then remove the sandbox container it
    left; fails the test when the run ends first (it could not be killed mid-way)."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if ready():
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the {what} finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    from agentflow.sandbox.docker import reap_orphans

    reap_orphans()  # the killed process's container


def benchmark(name: str) -> ModuleType:
    """benchmarks/NAME.py as a module (a script, not part of the package: its figures are tested), with its
    folder on sys.path while it loads, as when it runs (the scripts import each other)."""
    folder = str(ROOT / "benchmarks")
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # as an import would: a dataclass looks its module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module


def resolve_bench() -> ModuleType:
    """benchmarks/repair_resolve.py as a module."""
    return benchmark("repair_resolve")
