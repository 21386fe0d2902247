"""Runs mini-swe-agent on one task for `benchmarks/peers.py`, inside the benchmark's own venv (mini-swe-agent and
its litellm are no dependency of agentflow): reads a job (JSON) on stdin, writes one JSON result to the job's
`result` file (not stdout, where litellm prints notices of its own).

mini-swe-agent runs as it ships: its `DefaultAgent` loop, one of its SWE-bench configs (prompts, observation
template, step limit) and its `DockerEnvironment`, pointed at agentflow's sandbox image with no network. The
container is set up the way agentflow's own test runs are (`agentflow.swe.testrun.test_env`): the repository at
its base commit as a git repository in the config's working directory, a `python` next to `python3`, the
repository root and `src/` importable, the task's test-time requirements installed offline from its wheelhouse.
The model is the served one, through litellm's OpenAI-compatible client (`openai/NAME` at `api_base`).

Importable without mini-swe-agent (the pure helpers are tested in agentflow's venv); only `main` needs it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from typing import Any

SITE = "/opt/agentflow/site"
WHEELS = "/opt/agentflow/wheels"


def usage_tokens(messages: list[dict[str, Any]]) -> tuple[int, int]:
    """(prompt, completion) tokens of every model response a trajectory holds, answered or rejected for its
    format (mini-swe-agent keeps the raw response of both in the message's `extra.response`)."""
    prompt = completion = 0
    for message in messages:
        response = (message.get("extra") or {}).get("response")
        usage = response.get("usage") if isinstance(response, dict) else None
        if isinstance(usage, dict):
            prompt += int(usage.get("prompt_tokens") or 0)
            completion += int(usage.get("completion_tokens") or 0)
    return prompt, completion


def python_path(cwd: str, has_src: bool) -> str:
    """PYTHONPATH of the agent's commands: as agentflow's test runs have it (root, `src/`, the requirements)."""
    return ":".join([cwd, *([f"{cwd}/src"] if has_src else []), SITE])


def install_command(requirements: list[str]) -> str:
    """Offline install of the task's requirements (every wheel when none are listed), as
    `agentflow.swe.workspace.install_requirements` does it: nothing resolved."""
    targets = " ".join(shlex.quote(r) for r in requirements) or f"{WHEELS}/*.whl"
    return (f"python3 -m pip install -q --disable-pip-version-check --no-input --no-index --find-links {WHEELS} "
            f"--no-deps --target {SITE} {targets}")


def docker(*args: str, stdin: bytes | None = None, check: bool = True) -> str:
    proc = subprocess.run(["docker", *args], input=stdin, capture_output=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"docker {args[0]} failed: {proc.stderr.decode(errors='replace')[-500:]}")
    return proc.stdout.decode(errors="replace")


def as_root(container: str, script: str) -> str:
    return docker("exec", "-u", "0", container, "sh", "-c", script)


def set_up(container: str, job: dict[str, Any], cwd: str) -> bool:
    """The repository at its base commit in `cwd` (a git repository), `python`, the requirements; whether the
    repository has a `src/` folder."""
    uid = docker("exec", container, "sh", "-c", "echo $(id -u):$(id -g)").strip()
    as_root(container, f"mkdir -p {shlex.quote(cwd)} {WHEELS} {SITE} && "
                       'command -v python >/dev/null || ln -s "$(command -v python3)" /usr/local/bin/python')
    with open(job["repo_tar"], "rb") as fh:
        docker("cp", "-", f"{container}:{cwd}", stdin=fh.read())
    if job.get("wheel_tar"):
        with open(job["wheel_tar"], "rb") as fh:
            docker("cp", "-", f"{container}:{WHEELS}", stdin=fh.read())
        as_root(container, install_command(job.get("requirements") or []))
    as_root(container, f"chown -R {uid} {shlex.quote(cwd)}")
    git = "git -c user.name=base -c user.email=base@localhost -c commit.gpgsign=false"
    docker("exec", "-w", cwd, container, "sh", "-c", f"git init -q && git add -A && {git} commit -qm base")
    return docker("exec", "-w", cwd, container, "sh", "-c", "test -d src && echo yes", check=False).strip() == "yes"


def agent_config(config: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """The config's `agent` section with the run's call limit (cost has no price on a local server: no limit)."""
    return {**config.get("agent", {}), "step_limit": int(job["step_limit"]), "cost_limit": 0.0,
            "wall_time_limit_seconds": int(job.get("wall_time_s") or 0)}


def model_config(config: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """The config's `model` section pointed at the served model (litellm's `openai/NAME` at `api_base`)."""
    section = {k: v for k, v in config.get("model", {}).items() if k not in ("model_name", "model_kwargs")}
    kwargs = {**config.get("model", {}).get("model_kwargs", {}), "api_base": job["api_base"],
              "api_key": os.environ.get("PEERS_API_KEY", "dummy"), "drop_params": True, **job.get("sampling", {})}
    kwargs.pop("parallel_tool_calls", None)  # a tool-call option; the text-based configs send no tools
    return {**section, "model_name": job["model_name"], "model_class": job.get("model_class", "litellm_textbased"),
            "model_kwargs": kwargs, "cost_tracking": "ignore_errors"}


def run(job: dict[str, Any]) -> dict[str, Any]:
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.config import get_config_from_spec
    from minisweagent.environments.docker import DockerEnvironment
    from minisweagent.models import get_model

    config = get_config_from_spec(job["config"])
    env_cfg = {k: v for k, v in config.get("environment", {}).items() if k != "environment_class"}
    cwd = env_cfg.get("cwd", "/testbed")
    env_cfg.update(image=job["image"], run_args=["--rm", "--network", "none"], container_timeout="4h")
    started = time.monotonic()
    env = DockerEnvironment(**env_cfg)
    result: dict[str, Any] = {"instance_id": job["instance_id"], "exit_status": None, "submission": "", "diff": "",
                              "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "error": None}
    container = env.container_id or ""
    agent = None
    try:
        has_src = set_up(container, job, cwd)
        env.config.env = {**env.config.env, "PYTHONPATH": python_path(cwd, has_src)}
        agent = DefaultAgent(get_model(config=model_config(config, job)), env, **agent_config(config, job),
                             output_path=job.get("trajectory"))
        info = agent.run(job["problem_statement"])
        result.update(exit_status=info.get("exit_status"), submission=info.get("submission") or "")
    except Exception as exc:  # noqa: BLE001 - the result says what stopped it; the benchmark goes on
        result.update(exit_status=type(exc).__name__, error=str(exc)[-2000:])
    finally:
        if agent is not None:
            result["calls"] = agent.n_calls
            result["prompt_tokens"], result["completion_tokens"] = usage_tokens(agent.messages)
        if container:
            result["diff"] = docker("exec", "-w", cwd, container, "git", "diff", "--no-color", "--no-ext-diff", "HEAD",
                                    check=False)
            docker("rm", "-f", container, check=False)
            env.container_id = None  # removed: its own clean-up (a background `docker stop`) has nothing to do
    result["wall_s"] = round(time.monotonic() - started, 1)
    return result


def main() -> int:
    # stopped from outside (the benchmark interrupted): unwind, so the container is removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    job = json.loads(sys.stdin.read())
    with open(job["result"], "w", encoding="utf-8") as fh:
        json.dump(run(job), fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
