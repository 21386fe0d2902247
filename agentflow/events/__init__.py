"""One event schema for everything that happens in a run, linear or search tree, written as JSONL.

Every kind of event is a model (`agentflow.events.kinds`), all of them the discriminated union `AnyEvent`:
writers construct the model, readers get it back and match on its type. Reports are computed from events,
not kept beside them. A search tree is events whose `node_id` and `parent_id` are set.
"""

from agentflow.events.base import Event
from agentflow.events.kinds import AnyEvent
from agentflow.events.log import EventLog, EventSink, UnreadableEvents, parse_event, read_events

__all__ = ["AnyEvent", "Event", "EventLog", "EventSink", "UnreadableEvents", "parse_event", "read_events"]
