from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentflow.repair.outcome import Candidate
from agentflow.repair.verify.workbench import Verification
from tests.swe_fixtures import ROOT, TASKS_FILE, _private_cache, docker_image, read_jsonl

CASSETTES = Path(__file__).resolve().parent / "cassettes"

__all__ = ["CASSETTES", "ROOT", "TASKS_FILE", "_private_cache", "branches", "docker_image", "ran_in", "read_jsonl",
           "run_with_spectrum_plugin", "scripted_cassette", "short"]


def verified(cand: str, patch: str, verification: Verification, sample: int, part_of: str | None = None) -> Candidate:
    """A verified candidate as the search's `attempts` hold it."""
    return Candidate(instance_id=cand.split("/")[0], candidate_id=cand, parent_id=None, status="ok", patch=patch,
                     verification=verification, sample=sample, part_of=part_of)


def short(cid: str | None) -> str | None:
    """A candidate or search node id without its task: `inikit__inikit-1/b0.2` -> `b0.2`."""
    return cid.rsplit("/", 1)[1] if cid else None


def branches(events: list[dict[str, Any]]) -> dict[str, str | None]:
    """The repair's search tree from its final `search.node` events: branch -> its parent (`search`: the root)."""
    return {e["node_id"].rsplit("/", 1)[1]: short(e["parent_id"]) for e in events
            if e["kind"] == "search.node" and e["data"].get("final") and e["parent_id"]}


def ran_in(events: list[dict[str, Any]], branch: str, search: str = "search") -> list[str]:
    """The graph nodes a branch of the repair's search ran, in order."""
    return [e["node_id"].rsplit("/", 1)[1] for e in events if e["kind"] == "node.start"
            and e["data"].get("search") == search and e["data"].get("branch") == branch]


def scripted_cassette(path: Path, answers: list[str]) -> Path:
    """A cassette that serves `answers` in order, whatever is asked."""
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": [
        {"response": {"choices": [{"message": {"role": "assistant", "content": a}, "finish_reason": "stop"}],
                      "usage": {"input_tokens": 100, "output_tokens": 20}, "model": "scripted"}}
        for a in answers
    ]}))
    return path


def run_with_spectrum_plugin(root: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run pytest in `root` (importable) under the sandbox-side spectrum plugin, loaded as
    `spectrum.run_spectrum` loads it; (the run, the report file it writes)."""
    plugin_dir = root / "plug"
    plugin_dir.mkdir()
    (plugin_dir / "agentflow_spectrum.py").write_text((ROOT / "agentflow/repair/locate/_pytest_spectrum.py").read_text())
    out = root / "spectrum.json"
    env = {"PYTHONPATH": f"{plugin_dir}:{root}", "PATH": "/usr/bin:/bin", "AGENTFLOW_SPECTRUM_OUT": str(out),
           "PYTEST_ADDOPTS": "-p agentflow_spectrum"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    return done, out
