"""The events -> spans translator on its own, with the SDK's in-memory exporter: concurrent branches nest as
they ran, a finished run's events replayed give the spans the live run gave, and an unfinished run is closed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentflow.events import EventLog, read_events
from agentflow.events.kinds import (
    AgentStart,
    LimitReached,
    ModelCall,
    NodeEnd,
    NodeStart,
    RunEnd,
    RunStart,
    SandboxExec,
)
from agentflow.observe import instrument
from agentflow.observe.spans import SpanTranslator, replay


def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp, exporter


def shape(spans: tuple[ReadableSpan, ...]) -> list[tuple[Any, ...]]:
    """Each span as (name, parent's name, start, end, attributes), comparable across two exports."""
    by_id = {s.context.span_id: s for s in spans}
    return sorted(
        (s.name, by_id[s.parent.span_id].name if s.parent else None, s.start_time, s.end_time,
         tuple(sorted((k, str(v)) for k, v in s.attributes.items())))
        for s in spans
    )


async def branch(events: EventLog, name: str, delay: float) -> None:
    """A graph node that calls a tool and a sandbox command with no node id: only the task's context knows."""
    events.write(NodeStart(node_id=name))
    await asyncio.sleep(delay)
    events.write(SandboxExec(sandbox="s", command=f"make {name}", exit_code=0, duration_s=0.001, timed_out=False,
                             limit_hit=None, truncated=False))
    await asyncio.sleep(delay)
    events.write(ModelCall(node_id=name, spec="openai:gpt-4o-mini", model="gpt-4o-mini-2024-07-18", usage={"input_tokens": 10, "output_tokens": 3}, latency_s=0.001, n=1, cached=False,
                           finish_reasons=["stop"]))
    events.write(NodeEnd(node_id=name, writes=[name]))


async def test_concurrent_branches_nest_as_they_ran_and_replay_gives_the_same_spans(tmp_path: Path) -> None:
    tp, live = provider()
    events = EventLog(tmp_path / "events.jsonl", run_id="r")
    instrument(events, provider=tp)
    events.write(RunStart(workflow="fan", thread_id="t"))
    await asyncio.gather(branch(events, "left", 0.01), branch(events, "right", 0.003))  # interleaved
    events.write(RunEnd(thread_id="t", status="done"))
    events.close()
    spans = live.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    for span in spans:
        if span.name == "sandbox.exec":  # no node id: nested by the emitting task's own current span
            assert by_id[span.parent.span_id].name == "node " + span.attributes["agentflow.sandbox.command"][5:]
        if span.name.startswith("chat "):
            assert span.attributes["gen_ai.provider.name"] == "openai"
            assert span.attributes["gen_ai.request.model"] == "gpt-4o-mini"
            assert span.attributes["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
            assert by_id[span.parent.span_id].name.startswith("node ")
    assert sorted(s.name for s in spans if s.parent and by_id[s.parent.span_id].name == "workflow fan") == [
        "node left", "node right"]

    # replayed from the file, every span that the events place by their ids comes out the same; only the
    # id-less sandbox commands lose their task (the file does not say which concurrent branch ran them)
    tp2, replayed = provider()
    replay(read_events(tmp_path / "events.jsonl"), SpanTranslator(tp2.get_tracer("agentflow")))
    offline = shape(replayed.get_finished_spans())
    assert len(offline) == len(spans) == 7
    assert [s for s in offline if s[0] != "sandbox.exec"] == [s for s in shape(spans) if s[0] != "sandbox.exec"]


def test_an_unfinished_run_is_closed_at_its_last_event_and_others_become_span_events() -> None:
    tp, exporter = provider()
    events = EventLog(None, run_id="crash")
    instrument(events, provider=tp)
    events.write(RunStart(workflow="w"))
    events.write(NodeStart(node_id="a"))
    events.write(AgentStart(node_id="a", tools=[], text_protocol=False))
    last = events.write(LimitReached(node_id="a", limit="tokens", used={"tokens": 9}))
    events.close()  # a crash: no agent.end, node.end or run.end
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"workflow w", "node a", "invoke_agent a"}
    assert all(s.end_time == int(last.ts * 1e9) for s in spans.values())
    assert [e.name for e in spans["invoke_agent a"].events] == ["budget.exceeded"]


def test_without_endpoint_or_provider_nothing_is_attached(monkeypatch) -> None:
    for key in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(key, raising=False)
    events = EventLog(None)
    assert instrument(events) is None and events.sinks == [] and events.capture_content is False


def test_an_endpoint_without_the_otel_extra_is_a_user_error(monkeypatch) -> None:
    import sys

    import pytest

    from agentflow.errors import UserError
    from agentflow.observe import TraceConfig

    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)  # not installed
    with pytest.raises(UserError, match=r"agentflow\[otel\]"):
        instrument(EventLog(None), TraceConfig(endpoint="http://127.0.0.1:4318"))


def test_a_malformed_endpoint_is_a_one_line_cli_error(tmp_path: Path, capsys) -> None:
    from agentflow.cli.main import run

    approval = Path(__file__).resolve().parents[1] / "graph" / "approval.yaml"
    code = run(["run", str(approval), "-o", str(tmp_path), "-c", "trace.endpoint=localhost:4318",
                "--input", '{"topic": "x"}'])
    err = capsys.readouterr().err
    assert code == 2 and "http(s) URL" in err and "Traceback" not in err
    assert not list(tmp_path.glob("*/events.jsonl"))  # refused before the run started



async def test_a_graph_search_s_branches_are_spans_under_the_search_node(tmp_path: Path) -> None:
    """A search node's branches run the same node names at once: each branch is a span under the search node,
    holding its own node spans (which the run's other branches never close)."""
    from agentflow.graph import WorkflowRunner
    from agentflow.graph.define.loader import spec_from_dict
    from agentflow.graph.run.context import RunHandles

    tp, live = provider()
    events = EventLog(tmp_path / "events.jsonl", run_id="r")
    instrument(events, provider=tp)
    wf = {"name": "searched", "state": {"task": {"type": "str"}, "answer": {"type": "str"}, "score": {"type": "int"},
                                        "steps": {"type": "list", "reducer": "append"}},
          "nodes": {"go": {"search": {"strategy": "mcts", "n": 4, "concurrency": 2, "value": "score"}, "next": "END",
                           "subgraph": {"name": "try", "nodes": {
                               "attempt": {"fn": "tests.graph.search_nodes:attempt", "next": "refine"},
                               "refine": {"fn": "tests.graph.search_nodes:refine", "next": "END"}}}}}}
    runner = WorkflowRunner(spec_from_dict(wf), run_dir=tmp_path / "run", context=RunHandles(events=events))
    assert (await runner.start({"task": "x"})).status == "done"
    runner.close()
    events.close()
    spans = live.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    branches = [s for s in spans if s.name.startswith("branch go/")]
    assert len(branches) == 4 and all(by_id[b.parent.span_id].name == "node go" for b in branches)
    steps = [s for s in spans if s.name in ("node attempt", "node refine")]
    assert len(steps) == 4  # b0, b1: attempt from the root; b2, b3: refine, from their parents' checkpoints
    assert all(by_id[s.parent.span_id].name == "branch " + s.attributes["agentflow.search.branch"] for s in steps)
    assert sorted(s.name for s in steps) == ["node attempt", "node attempt", "node refine", "node refine"]
