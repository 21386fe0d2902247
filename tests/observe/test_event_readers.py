"""Every reader of a run's events takes every kind of event: the progress printer, the trace-span translator,
the viewer's loader and the training-data export, each fed one event of every member of `AnyEvent` (fields
filled from their types), written to a run folder and read back."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentflow.events import EventLog, read_events
from agentflow.events.kinds import ModelTurn
from agentflow.observe.export import trajectory_rows
from agentflow.observe.spans import SpanTranslator, replay
from agentflow.observe.view import load_run
from agentflow.repair.run.progress import ProgressPrinter
from tests.core.event_samples import MEMBERS, samples


def _run_folder(tmp_path: Path) -> Path:
    with EventLog(tmp_path / "events.jsonl", run_id="r") as log:
        for event in samples():
            log.write(event.model_copy(update={"node_id": f"t/{event.kind}", "parent_id": None,
                                               "instance_id": "t", "search": None, "branch": None}))
    return tmp_path


def test_the_file_holds_every_kind_and_reads_back_typed(tmp_path: Path) -> None:
    events = list(read_events(_run_folder(tmp_path) / "events.jsonl"))
    assert [type(e) for e in events] == list(MEMBERS)


def test_the_progress_printer_takes_every_kind(tmp_path: Path) -> None:
    lines: list[str] = []
    printer = ProgressPrinter(lines.append)
    said = [printer._said(event) for event in read_events(_run_folder(tmp_path) / "events.jsonl")]
    assert any(said) and lines == []  # `_said` raises on a kind it misreads; the sink itself never raises


def test_the_span_translator_takes_every_kind(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    replay(read_events(_run_folder(tmp_path) / "events.jsonl"), SpanTranslator(provider.get_tracer("t")))
    names = {span.name for span in exporter.get_finished_spans()}
    assert {"repair t/repair.start", "node t/node.start", "sandbox.exec"} <= names


def test_the_viewer_and_the_export_take_every_kind(tmp_path: Path) -> None:
    folder = _run_folder(tmp_path)
    shown = load_run(folder)["events"]
    assert [row[1] for row in shown] == [m.model_fields["kind"].default for m in MEMBERS if m is not ModelTurn]
    rows = trajectory_rows(folder)
    assert len(rows) == 1 and rows[0]["node_id"] == "t/model.turn"
