"""The node types agentflow ships are typed: each names the TypedDict of its state keys, its function takes that
state and a `NodeContext`, and a workflow that does not declare those keys gets them typed in its state schema."""

from __future__ import annotations

import typing

from agentflow.codegen.state import ExamplesRecord, RewardRecord, SimulationRecord
from agentflow.graph import spec_from_dict
from agentflow.graph.compile.compiler import registry_for, state_schema
from agentflow.graph.compile.nodetypes import default_registry
from agentflow.graph.run.context import NodeContext
from agentflow.instruct.state import BestRecord, ConstraintVerdict
from agentflow.reasoning.state import ScoreRecord, SelectionRecord, UcbRecord


def test_every_shipped_node_type_takes_the_state_it_names_and_a_node_context() -> None:
    shipped = [t for t in default_registry().types.values() if t.run.__module__.startswith("agentflow.")]
    assert {t.name.split(".")[0] for t in shipped} >= {"codegen", "instruct", "reason", "swe"}
    for node_type in shipped:
        assert node_type.state is not None, node_type.name
        hints = typing.get_type_hints(node_type.run)
        assert hints["state"] is node_type.state, node_type.name
        assert typing.get_origin(hints["ctx"]) is NodeContext, node_type.name
        node_type.key_types()  # every key's type resolves


def test_undeclared_keys_of_typed_nodes_get_their_records_types() -> None:
    spec = spec_from_dict({"name": "w", "nodes": {
        "plan": {"type": "codegen.plan", "next": "sim"},
        "sim": {"type": "codegen.simulate", "next": "test"},
        "test": {"type": "codegen.test", "next": "reward"},
        "reward": {"type": "codegen.reward", "next": "select"},
        "select": {"type": "reason.select", "next": "critic"},
        "critic": {"type": "instruct.critic", "next": "END"},
    }})
    hints = typing.get_type_hints(state_schema(spec, registry_for(spec)))
    assert hints["simulation"] is SimulationRecord and hints["tests"] is ExamplesRecord
    assert hints["score"] is RewardRecord and hints["verified"] is ScoreRecord and hints["plan_rounds"] is int
    assert hints["ucb"] is UcbRecord and hints["selection"] is SelectionRecord
    assert hints["critique"] == list[ConstraintVerdict] and hints["best"] is BestRecord
    assert hints["checks"] == dict[str, str | None]
