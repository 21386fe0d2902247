"""A task's record of its candidates: in memory (the outcome's count, the best so far), in the task's
`candidates.jsonl` and as `repair.candidate` events.

A resumed task keeps what its killed run recorded: the node it stopped in goes on from where it was (a graph
search takes its finished branches as they were). A node cut by the kill and run again records the same
candidates under the same ids: the later record of an id replaces the earlier one, so each candidate is in
the file once.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from agentflow.events import EventLog
from agentflow.events.kinds import RepairCandidate
from agentflow.repair.outcome import Candidate
from agentflow.repair.run.progress import candidate_reason
from agentflow.runfiles import read_text, replace_file
from agentflow.secrets import redact

FILE = "candidates.jsonl"


class CandidateLog:
    """Records candidates (call it with one); `rows` holds them in the order first recorded."""

    def __init__(self, inst_dir: Path | None, events: EventLog) -> None:
        self.path = inst_dir / FILE if inst_dir is not None else None
        self.events = events
        self.rows: list[Candidate] = []

    def __call__(self, cand: Candidate) -> None:
        ids = [row.candidate_id for row in self.rows]
        if cand.candidate_id in ids:  # recorded again by a node a kill had cut short: this record stands
            self.rows[ids.index(cand.candidate_id)] = cand
        else:
            self.rows.append(cand)
        self._write()
        v = cand.verification
        self.events.write(RepairCandidate(
            node_id=cand.candidate_id, parent_id=cand.parent_id, instance_id=cand.instance_id,
            candidate_id=cand.candidate_id, status=cand.status, passed=v.passed if v is not None else None,
            score=v.score if v is not None else None, reason=candidate_reason(cand), part_of=cand.part_of))

    def start(self) -> None:
        """Begin the record anew (a new task)."""
        self.rows = []
        self._write()

    def carry_on(self) -> None:
        """Take up what the killed run had recorded (a line it was writing when killed is left out)."""
        text = read_text(self.path) if self.path is not None and self.path.is_file() else None
        self.rows = []
        for line in (text or "").splitlines():
            with contextlib.suppress(ValueError):
                self.rows.append(Candidate.model_validate_json(line))
        self._write()

    def passed(self) -> bool:
        """Whether a recorded candidate passed tests that decide."""
        return any(c.status == "ok" and c.verification is not None and c.verification.passed is True
                   for c in self.rows)

    def _write(self) -> None:
        if self.path is not None:  # replaced whole, never written through a link the run folder brings
            replace_file(self.path, "".join(_line(c) for c in self.rows))


def _line(cand: Candidate) -> str:
    # the value agent's judgement comes after the row is written: the state's `attempts` hold it, not the file
    return json.dumps(redact(cand.model_dump(mode="json", exclude={"value", "assessment"}))) + "\n"


__all__ = ["FILE", "CandidateLog"]
