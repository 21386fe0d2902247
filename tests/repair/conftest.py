from __future__ import annotations

import json
from pathlib import Path

from tests.swe_fixtures import ROOT, TASKS_FILE, _private_cache, docker_image, read_jsonl

CASSETTES = Path(__file__).resolve().parent / "cassettes"

__all__ = ["CASSETTES", "ROOT", "TASKS_FILE", "_private_cache", "docker_image", "read_jsonl", "scripted_cassette"]


def scripted_cassette(path: Path, answers: list[str]) -> Path:
    """A cassette that serves `answers` in order, whatever is asked."""
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": [
        {"response": {"choices": [{"message": {"role": "assistant", "content": a}, "finish_reason": "stop"}],
                      "usage": {"input_tokens": 100, "output_tokens": 20}, "model": "scripted"}}
        for a in answers
    ]}))
    return path
