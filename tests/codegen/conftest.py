"""Helpers of the code-generation and instruction tests: scripted model replies and the CLI's JSON result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BACKEND = "docker"
"""The sandbox every test here runs generated code in."""


def reply(content: str) -> dict[str, Any]:
    return {"response": {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                         "usage": {"input_tokens": 50, "output_tokens": 20}, "model": "scripted"}}


def cassette(path: Path, replies: list[str]) -> Path:
    """A sequence cassette: the replies are served in order, whatever was asked."""
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": [reply(r) for r in replies]}))
    return path


def result_of(out: str) -> dict[str, Any]:
    return json.loads(out.strip().splitlines()[-1])


def asks(run_dir: str) -> list[dict[str, Any]]:
    """The run's model calls (`model.ask` events) in order: purpose, prompt, answer."""
    events = [json.loads(line) for line in (Path(run_dir) / "events.jsonl").read_text().splitlines()]
    return [e["data"] for e in events if e.get("kind") == "model.ask"]
