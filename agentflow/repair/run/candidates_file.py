"""A task's `candidates.jsonl`: a view of its candidates, written from the task's state (`task_candidates`: the
one record of them, checkpointed after every node) when the task ends. While it runs, each candidate is a
`repair.candidate` event; a resumed task's candidates come from its checkpoints, never from this file."""

from __future__ import annotations

import json
from pathlib import Path

from agentflow.repair.outcome import Candidate
from agentflow.runfiles import replace_file
from agentflow.secrets import redact

FILE = "candidates.jsonl"


def write_candidates(inst_dir: Path, candidates: list[Candidate]) -> None:
    """Write the task's candidates, one JSON line each (replaced whole, never through a link the run folder
    brings)."""
    replace_file(inst_dir / FILE, "".join(_line(c) for c in candidates))


def _line(cand: Candidate) -> str:
    # the value agent's judgement is the state's (`attempts`), for the choice: not a column of the file
    return json.dumps(redact(cand.model_dump(mode="json", exclude={"value", "assessment"}))) + "\n"


__all__ = ["FILE", "write_candidates"]
