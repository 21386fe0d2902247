import json
from pathlib import Path

import pytest

from agentflow.events import EventLog, read_events
from agentflow.events.kinds import ModelCall, NodeStart, SearchNode
from agentflow.secrets import redact, register_secret
from tests.core.event_samples import samples


def test_events_round_trip_and_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path, run_id="r1") as log:
        log.write(NodeStart(node_id="plan"))
        log.write(SearchNode(node_id="n2", parent_id="n1", strategy="mcts", thread="t", depth=1, action=None, value=0.5,
                             mean=0.5, visits=1, terminal=False, error=None, snapshot_id=None, diff_id=None))
    with open(path, "a") as fh:
        fh.write('{"kind": "tool.call", "ts"')  # a crash mid-write
    events = list(read_events(path))
    assert [type(e) for e in events] == [NodeStart, SearchNode]
    assert isinstance(events[1], SearchNode) and events[1].parent_id == "n1" and events[1].value == 0.5
    assert all(e.run_id == "r1" for e in events)


def test_secrets_never_reach_the_events_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1234567890abcdef")
    register_secret("generated-server-key-42")
    path = tmp_path / "events.jsonl"
    with EventLog(path) as log:
        log.write(ModelCall(spec="openai:gpt-4o", model="gpt-4o", latency_s=0.1, n=1, cached=False, finish_reasons=[],
                            usage={"headers": {"Authorization": "Bearer sk-test-1234567890abcdef"}},
                            messages=[{"role": "user", "content": "--api-key generated-server-key-42"}]))
    text = path.read_text()
    assert "sk-test-1234567890abcdef" not in text and "generated-server-key-42" not in text
    data = json.loads(text)["data"]
    assert data["usage"]["headers"]["Authorization"] == "Bearer ***"


def test_a_secret_in_any_field_of_any_kind_never_reaches_the_file_or_the_sinks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every event kind, every string field of it (keys of its mappings too) holding a secret: the sink
    (`EventLog.write`) redacts them all, in the file, the in-memory list and what the sinks see."""
    secret = "sk-test-abcdef1234567890"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    seen: list[str] = []
    path = tmp_path / "events.jsonl"
    with EventLog(path, run_id="r") as log:
        log.sinks.append(lambda event: seen.append(event.model_dump_json()))
        for event in samples(f"token {secret} here"):
            log.write(event)
        in_memory = [event.model_dump_json() for event in log.events]
    text = path.read_text()
    assert len(text.splitlines()) == len(samples()) == len(seen)
    for written in (text, *seen, *in_memory):
        assert secret not in written
    assert "token *** here" in text


def test_short_values_are_not_treated_as_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_TOKEN", "abc")
    assert redact("abc def") == "abc def"
