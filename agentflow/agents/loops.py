"""Loop guards: deterministic detectors for an agent that goes round in circles (docs/concepts/agents.md).

Repeats are counted by exact fingerprint (sha256 of canonical JSON) over the whole run, so a loop alternating
between two calls is caught too; a tool call's fingerprint includes its result, so polling something that
changes is no loop. Every detection is an `agent.loop` event.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from agentflow.config import StrictConfig

LoopAction = Literal["nudge", "stop", "end_branch"]
LoopKind = Literal["repeated_call", "repeated_failure", "repeated_answer"]

DEFAULT_NUDGE = (
    "You are repeating yourself: {what} {count} times with the same result. Doing it again will not change "
    "anything. Try a different approach, or give your final answer."
)


class LoopGuardConfig(StrictConfig):
    """When an agent counts as looping, and what then happens."""

    enabled: bool = True
    """Whether the loop guards run at all."""
    repeat_limit: int = Field(default=5, ge=2)
    """How many times the same tool call (same name and arguments) may get the same result before it is a loop."""
    failure_limit: int = Field(default=3, ge=2)
    """How many times the same tool call may fail with the same error before it is a loop."""
    answer_limit: int = Field(default=3, ge=2)
    """How many times the same final answer (a reply without tool calls) may be given before it is a loop."""
    action: LoopAction = "nudge"
    """What a detected loop does: `nudge` (send `nudge_message` to the model, then stop after `max_nudges`),
    `stop` (end the run with `stop_reason: loop`), `end_branch` (as `stop`, and the workflow node fails
    even where it routes failures with `on_error`, so a search ends that branch)."""
    nudge_message: str = DEFAULT_NUDGE
    """The message sent on a `nudge`; `{what}` and `{count}` are filled in."""
    max_nudges: int = Field(default=1, ge=0)
    """With `action: nudge`: how many nudges a run gets; the next detection stops it with `stop_reason: loop`."""


def fingerprint(value: Any) -> str:
    """sha256 of `value` as canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class LoopDetection:
    """One detected loop: its kind, a description for the model and the events, and how often it repeated."""

    kind: LoopKind
    what: str
    count: int

    def nudge(self, template: str) -> str:
        return template.format(what=self.what, count=self.count)


class LoopDetector:
    """Counts the fingerprints of one run's tool calls and answers; `observe_*` return a detection when a
    count reaches its limit (and every time after, until the run changes course)."""

    def __init__(self, config: LoopGuardConfig) -> None:
        self.config = config
        self.calls: Counter[str] = Counter()
        self.answers: Counter[str] = Counter()
        self.nudges = 0

    def observe_call(self, name: str, arguments: dict[str, Any], ok: bool, result: str) -> LoopDetection | None:
        """Record a tool call and its outcome; a detection when this exact call and result repeated too often."""
        if not self.config.enabled:
            return None
        count = _count(self.calls, [name, arguments, ok, result])
        if count < (self.config.repeat_limit if ok else self.config.failure_limit):
            return None
        args = json.dumps(arguments, sort_keys=True, default=str)
        if len(args) > 200:
            args = args[:200] + "..."
        if ok:
            return LoopDetection("repeated_call", f"the tool call {name}({args})", count)
        return LoopDetection("repeated_failure", f"the failing tool call {name}({args})", count)

    def observe_answer(self, text: str) -> LoopDetection | None:
        """Record a final answer; a detection when the same answer was given too often."""
        if not self.config.enabled:
            return None
        count = _count(self.answers, text.strip())
        limit = self.config.answer_limit
        return LoopDetection("repeated_answer", "the same answer", count) if count >= limit else None

    def should_nudge(self) -> bool:
        """Whether a detection now nudges (and counts the nudge) rather than stops."""
        if self.config.action != "nudge" or self.nudges >= self.config.max_nudges:
            return False
        self.nudges += 1
        return True


def _count(counter: Counter[str], value: Any) -> int:
    """Count `value` once more by its fingerprint; how often it has been seen."""
    key = fingerprint(value)
    counter[key] += 1
    return counter[key]
