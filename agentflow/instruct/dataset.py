"""The instruction set written for agentflow: prompts, each with 2-4 constraints checked by code."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agentflow.instruct.checks import check

DATA = Path(__file__).resolve().parent / "data" / "instructions.jsonl"


class Instruction(BaseModel):
    id: str
    prompt: str
    """What the model sees (the constraints are stated in it, in words)."""
    checks: list[dict[str, Any]]
    """Checker specs (`{"kind": "max_words", "n": 60}`); grading only."""

    def grade(self, response: str) -> dict[str, Any]:
        """Each check's verdict, and whether all hold."""
        results = [{"kind": c["kind"], "ok": ok, "why": why} for c in self.checks for ok, why in [check(response, c)]]
        return {"all": all(r["ok"] for r in results), "checks": results}


def load_instructions(limit: int | None = None, *, seed: int = 0, path: Path = DATA) -> list[Instruction]:
    """The prompts in file order; with `limit`, a fixed subset chosen by `seed` (in file order)."""
    items = [Instruction.model_validate(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    if limit is not None and limit < len(items):
        keep = sorted(random.Random(seed).sample(range(len(items)), limit))
        items = [items[i] for i in keep]
    return items


__all__ = ["DATA", "Instruction", "load_instructions"]
