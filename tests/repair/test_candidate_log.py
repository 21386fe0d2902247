"""A task's candidates file across a kill and a resume (`agentflow.repair.run.candidate_log`)."""

from __future__ import annotations

import json
from pathlib import Path

from agentflow.events import EventLog
from agentflow.repair.outcome import Candidate
from agentflow.repair.run.candidate_log import FILE, CandidateLog
from agentflow.repair.verify.workbench import Verification


def _cand(cid: str, *, passed: bool | None = False, score: float = 0.5) -> Candidate:
    return Candidate(instance_id="t", candidate_id=f"t/{cid}", parent_id="t/root", status="ok", patch=f"diff {cid}\n",
                     verification=Verification(passed=passed, score=score), sample=1)


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["candidate_id"] for line in path.read_text().splitlines()]


def test_a_candidate_recorded_again_replaces_its_earlier_record(tmp_path: Path) -> None:
    events = EventLog()
    log = CandidateLog(tmp_path, events)
    log.start()
    log(_cand("b0.1"))
    log(_cand("b1.1", score=0.2))
    log(_cand("b1.1", score=0.4))  # the node that recorded it ran again after a kill
    assert _ids(tmp_path / FILE) == ["t/b0.1", "t/b1.1"]
    assert [c.verification.score for c in log.rows if c.verification] == [0.5, 0.4]
    assert json.loads((tmp_path / FILE).read_text().splitlines()[1])["verification"]["score"] == 0.4
    assert [e.kind for e in events.events].count("repair.candidate") == 3


def test_a_resumed_task_takes_up_the_killed_runs_candidates(tmp_path: Path) -> None:
    first = CandidateLog(tmp_path, EventLog())
    first.start()
    first(_cand("b0.1"))
    first(_cand("b2.2", passed=True, score=1.0))
    with open(tmp_path / FILE, "a") as fh:
        fh.write('{"instance_id": "t", "candidate_id": "t/b3')  # the kill cut this line
    resumed = CandidateLog(tmp_path, EventLog())
    resumed.carry_on()
    assert [c.candidate_id for c in resumed.rows] == ["t/b0.1", "t/b2.2"] and resumed.passed()
    resumed(_cand("b3.1"))
    assert _ids(tmp_path / FILE) == ["t/b0.1", "t/b2.2", "t/b3.1"]
    resumed.start()  # the record begun anew: so is its file
    assert resumed.rows == [] and (tmp_path / FILE).read_text() == "" and not resumed.passed()



def test_a_row_has_the_fields_it_always_had(tmp_path: Path) -> None:
    log = CandidateLog(tmp_path, EventLog())
    log.start()
    log(_cand("b0.1").model_copy(update={"value": 0.7, "assessment": "close"}))  # the value agent's, in the state
    row = json.loads((tmp_path / FILE).read_text())
    assert set(row) == {"instance_id", "candidate_id", "parent_id", "status", "patch", "dropped_test_files",
                        "edit_errors", "verification", "finish_reason", "sample", "answer", "window", "approach",
                        "part_of"}
