from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "swe-tasks"
TASKS_FILE = EXAMPLES / "tasks.jsonl"
GOLD_FILE = EXAMPLES / "gold.jsonl"


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


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path
