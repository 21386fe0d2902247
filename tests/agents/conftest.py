from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentflow.agents import Agent, load_agent_config
from agentflow.events import EventLog
from agentflow.models.base import ChatRequest
from agentflow.models.replay import RecordingModel, ReplayModel
from agentflow.tools import ToolContext, ToolRegistry

CASSETTES = Path(__file__).parent / "cassettes"
PACK = "tests.agents.repo_tools"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A tiny repository with a bug: add() subtracts."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "check.py").write_text(
        "from calc import add\nassert add(2, 3) == 5, f'add(2, 3) returned {add(2, 3)}'\nprint('check passed')\n"
    )
    return root


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    return ToolContext(events=EventLog(None, run_id="test"), state={"root": str(workspace)})


class Scripted:
    """An agent whose model replays a hand-written cassette, with every request it sent recorded."""

    def __init__(self, agent: Agent, recording: Path) -> None:
        self.agent = agent
        self.recording = recording

    def requests(self) -> list[ChatRequest]:
        if not self.recording.exists():
            return []
        data = json.loads(self.recording.read_text())
        return [ChatRequest.model_validate(i["request"]) for i in data["interactions"]]


@pytest.fixture
def scripted(tmp_path: Path) -> Callable[..., Scripted]:
    def make(
        role: str, cassette: str, *overrides: str, tools: ToolRegistry | None = None, **_: Any
    ) -> Scripted:
        recording = tmp_path / f"recorded-{cassette}.json"
        model = RecordingModel(ReplayModel(CASSETTES / f"{cassette}.json"), recording)
        config = load_agent_config(role, [f"tools=[{PACK}]", *overrides])
        return Scripted(Agent(config, model=model, tools=tools), recording)

    return make
