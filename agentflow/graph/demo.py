"""Model-free node functions used by the shipped `demo` workflow (and handy in tests and docs)."""

from __future__ import annotations

from typing import Any


def prepare(state: dict[str, Any]) -> dict[str, Any]:
    """Normalise the topic and start the count."""
    topic = str(state.get("topic") or "agentflow").strip()
    return {"topic": topic, "count": 0, "notes": [f"topic: {topic}"]}


def outline(state: dict[str, Any]) -> dict[str, Any]:
    return {"notes": [f"outline of {state['topic']}"]}


def examples(state: dict[str, Any]) -> dict[str, Any]:
    return {"notes": [f"examples for {state['topic']}"]}


def draft(state: dict[str, Any]) -> dict[str, Any]:
    """One drafting round; the route after it loops until `rounds` rounds are done."""
    count = int(state.get("count") or 0) + 1
    done = count >= int(state.get("rounds") or 2)
    return {"count": count, "status": "done" if done else "again", "notes": [f"draft round {count}"]}


def summarize(state: dict[str, Any]) -> dict[str, Any]:
    return {
        "summary": f"{state['topic']}: {len(state.get('notes') or [])} notes after {state.get('count')} rounds"
    }


def review_gate(state: dict[str, Any]) -> dict[str, Any]:
    """After the critic: accept when no critical/major issue is left or after `max_rounds` revisions.

    A missing critique is never read as "no issues": it fails the node (and so the run)."""
    critique = state.get("critique")
    if not critique:
        raise ValueError("review_gate: the state has no critique to review (did the critic fail?)")
    blocking = [i for i in critique.get("issues") or [] if i.get("severity") in ("critical", "major")]
    rounds = int(state.get("rounds") or 0) + 1
    accept = not blocking or rounds >= int(state.get("max_rounds") or 3)
    return {"rounds": rounds, "verdict": "accept" if accept else "revise"}
