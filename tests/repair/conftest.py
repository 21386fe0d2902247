from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TASKS_FILE = ROOT / "examples" / "swe-tasks" / "tasks.jsonl"
CASSETTES = Path(__file__).resolve().parent / "cassettes"


# package scope: a session-scoped autouse fixture would stay active for the other test folders too
@pytest.fixture(scope="package", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory):
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
    from agentflow.errors import UserError

    try:
        from agentflow.sandbox.docker import docker_client

        docker_client()
    except UserError as exc:
        pytest.skip(f"Docker is not available: {exc}")
    from agentflow.sandbox.image import ensure_image

    return ensure_image()


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
