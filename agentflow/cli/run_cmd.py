"""`agentflow run WORKFLOW`: run a workflow durably; resume, approve or edit a paused/crashed thread."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Literal

import typer
from pydantic import Field

from agentflow.cli.common import (
    CONFIG_OPTION,
    JSON_OPTION,
    is_tty,
    new_run_id,
    parse_json_input,
    print_view_hint,
)
from agentflow.cli.serve_flag import SERVE_OPTION, check_serve, serving
from agentflow.config import StrictConfig
from agentflow.errors import UserError
from agentflow.observe.config import TraceConfig

OUTPUT_OPTION = typer.Option(Path("runs"), "-o", "--output", help="Folder that holds run directories.")


class RunConfig(StrictConfig):
    """Settings of `agentflow run` (change with -c key=value)."""

    step_limit: int | None = None
    """Most super-steps per run (overrides the workflow's step_limit)."""
    keep_last: int | None = 20
    """Checkpoints kept per thread (older ones and their unreferenced blobs are garbage-collected); null keeps all."""
    checkpointer: str = "sqlite"
    """`sqlite` (runs/<run_id>/checkpoints.db), `memory`, or a postgres:// URL (needs agentflow[postgres])."""
    durability: Literal["sync", "async", "exit"] = "sync"
    """When checkpoints are written: before the next step starts (sync), alongside it (async), at the end (exit)."""
    tools: list[str] = Field(default_factory=list)
    """Extra tool packs for tool nodes and ctx.call_tool (added to the workflow's tools:)."""
    trace: TraceConfig = Field(default_factory=TraceConfig)
    """OpenTelemetry spans of the run (`trace.endpoint`, `trace.content`); nothing is sent unless configured."""


def check_model_spec(spec: str) -> str:
    """A one-line UserError for a malformed spec, before anything is created or loaded."""
    from agentflow.models.spec import parse_spec

    parse_spec(spec)
    return spec


def find_run(root: Path, thread_id: str) -> Path:
    """The run directory holding `thread_id`: runs/<thread_id>, or the run whose run.json names the thread."""
    direct = root / thread_id
    if (direct / "run.json").is_file():
        return direct
    if root.is_dir():
        for meta in root.glob("*/run.json"):
            try:
                if json.loads(meta.read_text()).get("thread_id") == thread_id:
                    return meta.parent
            except (OSError, ValueError):
                continue
    raise UserError(f"no run with thread {thread_id!r} under {root}", hint="check the id and -o/--output")


def _load_tools(packs: list[str]) -> dict[str, Any]:
    if not packs:
        return {}
    from agentflow.tools.packs import load_pack

    tools: dict[str, Any] = {}
    for pack in packs:
        for t in load_pack(pack):
            tools[t.name] = t
    return tools


class _Printer:
    """Shows progress: live node table on a TTY, plain lines otherwise, JSON lines with --json."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.status: dict[str, str] = {}
        self.runs: dict[str, int] = {}
        self.midline = False
        self.live: Any = None
        if mode == "live":
            from rich.live import Live

            self.live = Live(self._table(), refresh_per_second=8, transient=False)
            self.live.start()

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(title="nodes", show_header=True)
        table.add_column("node")
        table.add_column("status")
        for node, status in self.status.items():
            table.add_row(node, status)
        return table

    def __call__(self, event: Any) -> None:
        prefix = "/".join(part.split(":")[0] for part in event.namespace)
        if event.mode == "updates" and isinstance(event.data, dict):
            for node, update in event.data.items():
                name = f"{prefix}/{node}" if prefix else node
                if node == "__interrupt__":
                    values = [getattr(i, "value", None) for i in (update or ())]
                    where = (
                        next((v.get("node") for v in values if isinstance(v, dict)), None) or prefix or "?"
                    )
                    self._out({"event": "interrupt", "node": where, "value": values}, None)
                    continue
                keys = sorted(update) if isinstance(update, dict) else []
                self.runs[name] = self.runs.get(name, 0) + 1
                times = f" x{self.runs[name]}" if self.runs[name] > 1 else ""
                self.status[name] = f"done{times}" + (f" ({', '.join(keys)})" if keys else "")
                self._out(
                    {"event": "update", "node": name, "update": update}, f"{name}: done {', '.join(keys)}"
                )
        elif event.mode == "custom":
            data = event.data if isinstance(event.data, dict) else {"chunk": event.data}
            self._out({"event": "custom", **data}, None)
            if self.mode == "plain" and isinstance(data.get("chunk"), str):
                sys.stdout.write(data["chunk"])
                sys.stdout.flush()
                self.midline = True
        elif event.mode == "messages":
            chunk, meta = event.data if isinstance(event.data, tuple) else (event.data, {})
            text = getattr(chunk, "content", "")
            self._out({"event": "token", "node": meta.get("langgraph_node"), "text": text}, None)

    def _out(self, obj: dict[str, Any], line: str | None) -> None:
        if self.mode == "json":
            typer.echo(json.dumps(obj, default=str))
        elif self.mode == "live":
            self.live.update(self._table())
        elif line is not None:
            if self.midline:  # end a line of streamed tokens first
                typer.echo("")
                self.midline = False
            typer.echo(line)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_cmd(
        workflow: str = typer.Argument(..., help="YAML file or name of a shipped workflow (see workflows/)."),
        input: str | None = typer.Option(None, "--input", "-i", help="Initial state as JSON or @file.json."),
        model: str | None = typer.Option(
            None, "--model", "-m", help="Model spec for agent nodes, e.g. openai:gpt-4o-mini."
        ),
        serve: str | None = SERVE_OPTION,
        thread_id: str | None = typer.Option(
            None, "--thread-id", help="Thread id of a new run (default: the run id)."
        ),
        resume: str | None = typer.Option(
            None, "--resume", help="Continue this thread from its last checkpoint."
        ),
        approve: bool = typer.Option(
            False, "--approve", help="With --resume: approve the pending interrupt."
        ),
        edit: str | None = typer.Option(
            None, "--edit", help="With --resume: state updates (JSON or @file) applied before continuing."
        ),
        config: list[str] | None = CONFIG_OPTION,
        as_json: bool = JSON_OPTION,
        output: Path = OUTPUT_OPTION,
    ) -> int:
        """Run WORKFLOW; writes runs/<run_id>/ (config.resolved.yaml, events.jsonl, checkpoints.db)."""
        from agentflow.config import load_config
        from agentflow.graph.loader import load_workflow
        from agentflow.graph.validate import check_workflow

        if resume is None and (approve or edit is not None):
            raise UserError("--approve and --edit need --resume THREAD_ID")
        if resume is not None and input is not None:
            raise UserError("--input starts a new run; drop it when using --resume")
        cfg = load_config(RunConfig, config or [])
        if model is not None:
            check_model_spec(model)
        check_serve(serve)
        inputs = parse_json_input(input)
        edits = parse_json_input(edit) if edit is not None else None
        spec = load_workflow(workflow)
        if cfg.step_limit is not None:
            spec.step_limit = cfg.step_limit
        check_workflow(spec)
        resume_dir = find_run(output, resume) if resume is not None else None

        with serving(serve) as handle:
            result, run_id, rdir = _run_workflow(
                spec, workflow, cfg, handle=handle, model=model, serve=serve, inputs=inputs, edits=edits,
                thread_id=thread_id, resume=resume, resume_dir=resume_dir, approve=approve, output=output,
                printer_mode="json" if as_json else "live" if is_tty() else "plain",
            )
        summary = {
            "event": "result",
            "run_id": run_id,
            "thread_id": result.thread_id,
            "status": result.status,
            "run_dir": str(rdir),
            "state": result.state,
            "interrupt": result.interrupt,
        }
        if as_json:
            typer.echo(json.dumps(summary, default=str))
        elif result.status == "interrupted":
            info = result.interrupt or {}
            typer.echo(f"paused at '{info.get('node')}': {info.get('message')}")
            if info.get("state"):
                typer.echo(json.dumps(info["state"], indent=2, default=str))
            typer.echo(
                f"continue with: agentflow run {workflow} -o {output} --resume {result.thread_id} --approve "
                f"(or --edit JSON)"
            )
        else:
            typer.echo(json.dumps(result.state, indent=2, default=str))
            typer.echo(f"run {run_id} done (thread {result.thread_id}) in {rdir}")
        print_view_hint(rdir)
        return 0


def _run_workflow(spec: Any, workflow: str, cfg: RunConfig, *, handle: Any, model: str | None,
                  serve: str | None, inputs: dict[str, Any], edits: dict[str, Any] | None,
                  thread_id: str | None, resume: str | None, resume_dir: Path | None, approve: bool,
                  output: Path, printer_mode: str) -> tuple[Any, str, Path]:
    """Create or find the run directory and run (or resume) the workflow; `handle` is a --serve server."""
    from agentflow.events import EventLog
    from agentflow.graph.context import RunContext
    from agentflow.graph.runner import WorkflowRunner

    if resume is not None and resume_dir is not None:
        rdir = resume_dir
        meta = json.loads((rdir / "run.json").read_text())
        run_id, thread = meta["run_id"], resume
    else:
        run_id = new_run_id(spec.name)
        thread = thread_id or run_id
        rdir = output / run_id
        rdir.mkdir(parents=True, exist_ok=True)
        meta = {"run_id": run_id, "thread_id": thread, "workflow": workflow}
        (rdir / "run.json").write_text(json.dumps(meta))
        resolved = {
            "workflow": spec.name,
            "source": spec.source_path,
            "model": model or spec.model,
            **({"serve": serve} if serve is not None else {}),
            "input": inputs,
            "run": json.loads(cfg.model_dump_json()),
        }
        (rdir / "config.resolved.yaml").write_text(dump_yaml_dict(resolved))
    checkpointer: Any = "sqlite" if cfg.checkpointer == "sqlite" else cfg.checkpointer
    events = EventLog(rdir / "events.jsonl", run_id=run_id)
    from agentflow.observe import instrument

    instrument(events, cfg.trace)
    ctx = RunContext(events=events, tools=_load_tools(cfg.tools), model=model or spec.model)
    served_model = None
    if handle is not None and model is None:  # --model beats --serve, which beats the workflow's model:
        served_model = handle.load_model()
        ctx.model, ctx.chat_model = handle.spec, served_model
    printer = _Printer(printer_mode)
    runner = None
    try:
        runner = WorkflowRunner(
            spec,
            run_dir=rdir,
            checkpointer=checkpointer,
            context=ctx,
            keep_last=cfg.keep_last,
            durability=cfg.durability,
        )
        if resume is not None:
            coro = runner.resume(thread, approve=approve, edit=edits, on_event=printer)
        else:
            coro = runner.start(inputs, thread_id=thread, on_event=printer)
        result = asyncio.run(_with_metrics(coro, handle, events, served_model))
    finally:
        printer.stop()
        if runner is not None:
            runner.close()
        events.close()
    return result, run_id, rdir


async def _with_metrics(coro: Any, handle: Any, events: Any, served_model: Any) -> Any:
    """Await the run; with a --serve server, write `server.metrics` events every minute and at the end."""
    if handle is None:
        return await coro
    from agentflow.serving.metrics import report_metrics

    try:
        async with report_metrics(handle, events, interval_s=60.0):
            return await coro
    finally:
        if served_model is not None:
            await served_model.aclose()


def dump_yaml_dict(data: dict[str, Any]) -> str:
    import yaml

    from agentflow.secrets import redact

    return yaml.safe_dump(redact(data), sort_keys=False)
