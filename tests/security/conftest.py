from __future__ import annotations

from tests.swe_fixtures import GOLD_FILE, TASKS_FILE, _private_cache, docker_image, read_jsonl, write_jsonl

__all__ = ["GOLD_FILE", "TASKS_FILE", "_private_cache", "docker_image", "read_jsonl", "write_jsonl"]
