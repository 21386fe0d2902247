"""A small app built on agentflow: a support desk. Its agent looks the customer up, opens a ticket and drafts
a reply; a workflow then queues the reply, and pages the on-call engineer for urgent tickets.

The app's own handles (a SQLite database, an outbox, a pager) reach the tools and nodes as typed
dependencies (`ToolContext[Deps]`, `NodeContext[Deps]`): no globals, so a test passes its own.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

from pydantic import BaseModel

from agentflow import Agent, NodeContext, ToolContext, Workflow, tool
from agentflow.graph import END, WorkflowSpec
from agentflow.models import ChatModel
from agentflow.tools import ToolRegistry

AGENT_FILE = str(Path(__file__).with_name("support_agent.yaml"))


@dataclass
class Deps:
    db: sqlite3.Connection
    outbox: list[str] = field(default_factory=list)
    paged: list[int] = field(default_factory=list)


def open_db() -> sqlite3.Connection:
    # sync tools run in worker threads, so the connection may not be tied to the thread that opened it
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.executescript(
        "create table customers (id integer primary key, email text unique, name text);"
        "create table tickets (id integer primary key, customer_id integer, summary text, priority text);"
    )
    return db


@tool
def find_customer(email: str, ctx: ToolContext[Deps]) -> dict[str, Any]:
    """Find a customer by email address.

    Args:
        email: the customer's email address.
    """
    row = ctx.deps.db.execute("select id, name from customers where email = ?", (email,)).fetchone()
    return {"found": False} if row is None else {"found": True, "id": row[0], "name": row[1]}


@tool
def open_ticket(customer_id: int, summary: str, priority: Literal["low", "urgent"], ctx: ToolContext[Deps]) -> str:
    """Open a support ticket.

    Args:
        customer_id: the customer's id (from find_customer).
        summary: one line saying what is wrong.
        priority: urgent when the customer cannot work at all.
    """
    cursor = ctx.deps.db.execute(
        "insert into tickets (customer_id, summary, priority) values (?, ?, ?)", (customer_id, summary, priority)
    )
    return f"ticket {cursor.lastrowid} opened"


class Triage(BaseModel):
    """The agent's answer."""

    ticket_id: int
    priority: Literal["low", "urgent"]
    reply: str


TOOLS = [find_customer, open_ticket]


def support_agent(model: ChatModel | None = None) -> Agent:
    """The agent on its own (`model` replaces the one support_agent.yaml names)."""
    return Agent(AGENT_FILE, model=model, tools=ToolRegistry(TOOLS), output_type=Triage)


class DeskState(TypedDict, total=False):
    message: str
    triage: dict[str, Any]
    queued: bool


def queue_reply(state: DeskState, ctx: NodeContext[Deps]) -> dict[str, Any]:
    triage = Triage.model_validate(state["triage"])
    ctx.deps.outbox.append(triage.reply)
    if triage.priority == "urgent":
        ctx.deps.paged.append(triage.ticket_id)
    return {"queued": True}


def support_workflow() -> WorkflowSpec:
    """message -> triage (the agent) -> queue_reply -> END."""
    wf = Workflow("support_desk", state=DeskState)
    wf.agent("triage", AGENT_FILE, output="triage", input="message", tools=TOOLS, output_type=Triage)
    wf.node("queue_reply", queue_reply).edge("triage", "queue_reply").edge("queue_reply", END)
    return wf.start("triage").spec
