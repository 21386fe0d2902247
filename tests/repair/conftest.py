from __future__ import annotations

from pathlib import Path

from tests.swe_fixtures import ROOT, TASKS_FILE, _private_cache, docker_image, read_jsonl

CASSETTES = Path(__file__).resolve().parent / "cassettes"

__all__ = ["CASSETTES", "ROOT", "TASKS_FILE", "_private_cache", "docker_image", "read_jsonl"]
