"""Event kinds are types: every kind a writer in agentflow/ constructs is a member of `AnyEvent`, no writer
names a kind by a string, each member round-trips through its JSON line, and lines that are no event of
this version are reported, not dropped silently."""

from __future__ import annotations

import ast
import json
import re
import typing
from pathlib import Path

import pytest

from agentflow.events import Event, EventLog, UnreadableEvents, parse_event, read_events
from agentflow.events import kinds as kinds_module
from agentflow.events.kinds import LimitReached, RepairEnd, RepairStatus
from tests.core.event_samples import MEMBERS, samples

ROOT = Path(__file__).resolve().parents[2] / "agentflow"
KIND = re.compile(r"^[a-z_]+(\.[a-z_]+)+$")


def _trees() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(), str(path))) for path in sorted(ROOT.rglob("*.py"))]


def test_every_event_model_is_a_member_and_kinds_are_unique() -> None:
    defined = {obj for obj in vars(kinds_module).values()
               if isinstance(obj, type) and issubclass(obj, Event) and obj is not Event}
    assert defined == set(MEMBERS)
    kinds = [model.model_fields["kind"].default for model in MEMBERS]
    assert len(kinds) == len(set(kinds)) and all(KIND.match(k) for k in kinds)


def test_every_kind_written_in_agentflow_is_a_member_of_the_union() -> None:
    """Writers construct event models they import from `agentflow.events.kinds`: each one they name is a
    member; and no call anywhere passes a kind as a string (the older `emit("model.call", ...)`)."""
    members = {model.__name__ for model in MEMBERS}
    named: dict[str, str] = {}
    by_string: list[str] = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "agentflow.events.kinds":
                for alias in node.names:
                    named[alias.name] = str(path.relative_to(ROOT))
            elif isinstance(node, ast.Call) and WRITER.search(_called(node)) and any(
                    isinstance(arg, ast.Constant) and isinstance(arg.value, str) and KIND.match(arg.value)
                    for arg in node.args):
                by_string.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    events_named = {name: where for name, where in named.items() if isinstance(getattr(kinds_module, name), type)
                    and issubclass(getattr(kinds_module, name), Event)}
    assert events_named, "no writer imports an event model: the scan is broken"
    assert set(events_named) <= members
    assert by_string == []


WRITER = re.compile(r"(^|_)emit|^write$")
"""The names of the event log's writers and of the helpers around it (`ctx.emit`, `nodekit.emit`)."""


def _called(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""



@pytest.mark.parametrize("event", samples(), ids=lambda e: e.kind)
def test_each_kind_round_trips_through_its_json_line(event: Event) -> None:
    line = event.model_dump_json()
    raw = json.loads(line)
    assert set(raw) == {"ts", "run_id", "kind", "node_id", "parent_id", "data"}  # the viewer's layout
    assert parse_event(raw) == event


def test_a_limit_is_a_field_and_keeps_its_older_spelling_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path) as log:
        log.write(LimitReached(limit="wall_seconds", cut=["edit"]))
        log.write(RepairEnd(status=RepairStatus.LIMITS_EXCEEDED, limit="model_calls"))
    first = json.loads(path.read_text().splitlines()[0])
    assert first["data"]["kind"] == "wall_seconds" and first["kind"] == "budget.exceeded"
    limit, end = read_events(path)
    assert isinstance(limit, LimitReached) and limit.limit == "wall_seconds"
    assert isinstance(end, RepairEnd) and end.status is RepairStatus.LIMITS_EXCEEDED
    assert end.status_text == "limits_exceeded:model_calls"


def test_lines_of_another_version_are_skipped_with_one_warning_naming_them(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path) as log:
        log.write(LimitReached(limit="tokens"))
    with path.open("a") as fh:
        fh.write(json.dumps({"ts": 1.0, "kind": "repair.retired", "data": {}}) + "\n")
        fh.write(json.dumps({"ts": 1.0, "kind": "budget.exceeded", "data": {"cut": "edit"}}) + "\n")
        fh.write("not json\n")
    with pytest.warns(UnreadableEvents, match=r"3 line\(s\) skipped.*line 2: .*repair\.retired") as caught:
        events = list(read_events(path))
    assert [type(e) for e in events] == [LimitReached]
    assert len(caught) == 1 and str(path) in str(caught[0].message)


def test_the_union_is_what_the_module_says_it_is() -> None:
    assert typing.get_args(typing.get_args(kinds_module.AnyEvent)[0]) == MEMBERS
