"""`agentflow run -c nodes.NAME.KEY=VALUE`: a workflow's node settings from the command line, over the YAML's,
validated like them; a wrong node or value is a one-line usage error (exit 2) before anything runs."""

from __future__ import annotations

import pytest

from agentflow.cli.main import run
from agentflow.cli.workflow.run_cmd import RunConfig, load_run_workflow


def test_node_settings_override_the_yaml() -> None:
    spec = load_run_workflow("decrim", RunConfig.model_validate(
        {"nodes": {"refine": {"n": 1}, "refinement": {"code_fix": False}}}))
    assert spec.nodes["refine"].search["n"] == 1 and spec.nodes["refine"].search["gather"] == ["refinements"]
    assert spec.nodes["refine"].subgraph.nodes["refinement"].settings == {"code_fix": False}  # a branch's node
    assert spec.nodes["critique"].settings == {}  # the others as the YAML has them


@pytest.mark.parametrize(("item", "needle"), [
    ("nodes.nope.x=1", "-c nodes.nope: decrim has no typed or search node 'nope' (its typed and search nodes: decompose, respond, critique, refine, refinement)"),
    ("nodes.refine.n=0", "search.n: Input should be greater than or equal to 1"),
    ("nodes.refinement.colour=red", "node 'refinement': settings.colour"),
])
def test_bad_node_settings_exit_2_in_one_line(item: str, needle: str, tmp_path: object,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["run", "decrim", "-m", "replay:/dev/null", "-o", str(tmp_path), "-c", item, "-i", '{"prompt": "x"}']) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("agentflow: error: ") and needle in err
