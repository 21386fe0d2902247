"""Human approval of tool calls, bound to the exact call (docs/concepts/agents.md).

The approval that resumes a paused run carries the `call_hash` (sha256 of the name and the arguments as
canonical JSON) of the call the human saw; the call runs only when it is the hash of the call about to run,
else it is refused and asked about anew, so an approval never covers a call nobody saw. Every request, grant
and refusal is an event (`approval.requested`, `approval.granted`, `approval.refused`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from agentflow.agents.loops import fingerprint
from agentflow.events import Event
from agentflow.events.kinds import ApprovalGranted, ApprovalRefused, ApprovalRequested
from agentflow.models.base import ToolCall

MAX_ASKS = 10
"""Approvals for other calls after which the call is declined (an approver that never answers for it)."""

ARGS_SHOWN = 2000
"""Characters of a call's arguments put in the interrupt's message (the full arguments are in `tool_call`)."""


def call_hash(name: str, arguments: Mapping[str, Any]) -> str:
    """What an approval is bound to: sha256 of [name, arguments] as canonical JSON (key order does not count)."""
    return fingerprint([name, dict(arguments)])


def needs_approval(patterns: list[str], name: str) -> bool:
    """Whether `name` is listed (or `*` lists every tool)."""
    return "*" in patterns or name in patterns


def approval_request(agent: str, call: ToolCall) -> dict[str, Any]:
    """The interrupt's value: what the human sees and approves."""
    digest = call_hash(call.name, call.arguments)
    args = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False, default=str)
    shown = args if len(args) <= ARGS_SHOWN else args[:ARGS_SHOWN] + "..."
    return {
        "node": agent,
        "message": f"approve the tool call {call.name}({shown}) [call_hash {digest[:16]}]",
        "state": {"tool_call": {"name": call.name, "arguments": call.arguments}, "call_hash": digest},
        "tool_call": {"name": call.name, "arguments": call.arguments},
        "call_hash": digest,
    }


Approver = Callable[[dict[str, Any]], Any]
"""Asks a human about an `approval_request` and returns the answer (`{"action": "approve", "call_hash": ...}`,
or another action to decline). A workflow run's agent nodes pass LangGraph's `interrupt`, which pauses the
run until it is resumed with the answer."""


def ask(agent: str, call: ToolCall, emit: Callable[[Event], None], interrupt: Approver) -> tuple[bool, str]:
    """Ask for approval of `call`; (approved, why not). An approval for another call is refused and the human
    is asked again."""
    request = approval_request(agent, call)
    digest = request["call_hash"]
    for _ in range(MAX_ASKS):
        emit(ApprovalRequested(tool=call.name, args=call.arguments, call_hash=digest))
        answer = interrupt(request)
        action = answer.get("action") if isinstance(answer, Mapping) else None
        given = answer.get("call_hash") if isinstance(answer, Mapping) else None
        if action == "approve" and given == digest:
            emit(ApprovalGranted(tool=call.name, args=call.arguments, call_hash=digest))
            return True, ""
        if action == "approve":
            emit(ApprovalRefused(tool=call.name, call_hash=digest, approved_hash=given,
                                 reason="the approval was given for another call"))
            continue  # asked anew: the next interrupt shows this call
        emit(ApprovalRefused(tool=call.name, call_hash=digest, reason=f"answer {action!r}"))
        return False, "not run: the human did not approve this call"
    emit(ApprovalRefused(tool=call.name, call_hash=digest, reason=f"{MAX_ASKS} approvals, none for this call"))
    return False, f"not run: asked {MAX_ASKS} times, no approval was for this call"
