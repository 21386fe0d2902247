import json
from pathlib import Path

import pytest

from agentflow.events import EventLog, read_events
from agentflow.secrets import redact, register_secret


def test_events_round_trip_and_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventLog(path, run_id="r1") as log:
        log.emit("node.start", node_id="plan")
        log.emit("search.node", node_id="n2", parent_id="n1", value=0.5)
    with open(path, "a") as fh:
        fh.write('{"kind": "tool.call", "ts"')  # a crash mid-write
    events = list(read_events(path))
    assert [e.kind for e in events] == ["node.start", "search.node"]
    assert events[1].parent_id == "n1" and events[1].data["value"] == 0.5
    assert all(e.run_id == "r1" for e in events)


def test_secrets_never_reach_the_events_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1234567890abcdef")
    register_secret("generated-server-key-42")
    path = tmp_path / "events.jsonl"
    with EventLog(path) as log:
        log.emit("model.call", headers={"Authorization": "Bearer sk-test-1234567890abcdef"},
                 args=["--api-key", "generated-server-key-42"])
    text = path.read_text()
    assert "sk-test-1234567890abcdef" not in text and "generated-server-key-42" not in text
    data = json.loads(text)["data"]
    assert data["headers"]["Authorization"] == "Bearer ***"


def test_short_values_are_not_treated_as_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_TOKEN", "abc")
    assert redact("abc def") == "abc def"
