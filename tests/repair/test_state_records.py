"""The repair's records in its checkpoints: a `Candidate` and a `Verification` come back as themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentflow.graph.compile.compiler import compile_workflow
from agentflow.graph.define.loader import load_workflow
from agentflow.graph.persist.checkpoint import AgentflowSaver
from agentflow.graph.persist.serde import RefusedType
from agentflow.repair.outcome import Candidate
from agentflow.repair.verify.workbench import Verification

SHIPPED = ("repair", "swe_search", "agentless", "codemonkeys")


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_workflows_checkpoint_builds_its_candidates_back_exactly(tmp_path: Path, name: str) -> None:
    # `attempts` is declared `type: list` in the YAML: the allowlist comes from the typed nodes' state keys
    saver = AgentflowSaver(tmp_path / "checkpoints.db")
    compile_workflow(load_workflow(f"workflows/{name}.yaml"), checkpointer=saver)
    base = Verification(passed=False, score=0.25, kind="test_cmd", counts=(1, 4), output="E assert 1 == 2")
    fix = Candidate(instance_id="t", candidate_id="t/b0.1", parent_id="t/root", status="ok", patch="diff\n",
                    verification=base.model_copy(update={"passed": True, "score": 1.0}), sample=1001, value=0.9,
                    assessment="fixes it")
    state = {"base": base, "attempts": [fix], "tried": fix, "final": {"verification": fix.verified},
             "candidate": {"built_on": fix, "feedback": "a reviewer's notes", "value": 0.9}}
    back = saver.serde.loads_typed(saver.serde.dumps_typed(state))
    assert back == state
    assert type(back["attempts"][0]) is Candidate and type(back["base"]) is Verification
    assert back["base"].counts == (1, 4)  # a tuple stays a tuple: no JSON round trip


def test_a_checkpoint_naming_another_class_is_still_refused(tmp_path: Path) -> None:
    saver = AgentflowSaver(tmp_path / "checkpoints.db")
    compile_workflow(load_workflow("workflows/repair.yaml"), checkpointer=saver)
    from agentflow.repair.outcome import InstanceOutcome  # a pydantic class of the repair no state key names

    # refused at the first class no state key names: the outcome's status enum, or the outcome itself
    with pytest.raises(RefusedType, match="InstanceOutcome|RepairStatus"):
        saver.serde.loads_typed(saver.serde.dumps_typed({"x": InstanceOutcome(instance_id="t", status="no_patch")}))
