"""What `agentflow run` prints while a run goes: the thread id first, then a line per node start and end, per
model call (and one every `PROGRESS_EVERY_S` while a call runs, graph/run/streaming.py) and per tool call,
each with the run's elapsed time (on a TTY or not); on a TTY a live table of the nodes below the lines (what
each is doing, for how long); with --json one JSON object per event."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import typer

from agentflow.cli.common import terminal
from agentflow.errors import printable
from agentflow.graph.run.streaming import RunEvent

ARGS_CHARS = 60
"""Most characters of a tool call's arguments shown in its line."""


def _args(args: Any) -> str:
    if not isinstance(args, dict):
        return ""
    text = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in args.items())
    return text if len(text) <= ARGS_CHARS else text[: ARGS_CHARS - 1] + "…"


class RunPrinter:
    """`mode`: `json` (a JSON line per event), `live` (lines and a live node table: a TTY) or `plain`."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.midline = False
        self.calls: dict[tuple[tuple[str, ...], str], dict[str, Any]] = {}
        """(node path, tool) -> the arguments of its latest call (shown in the result's line)."""
        self.nodes: dict[str, dict[str, Any]] = {}
        """Node path -> {status, since, activity} for the live table."""
        self.live: Any = None

    def start(self, run_id: str, thread_id: str, run_dir: Path, *, how: str = "run") -> None:
        """The first line: which thread this is (to resume it), before anything runs."""
        if self.mode == "json":
            typer.echo(json.dumps({"event": "run.start", "run_id": run_id, "thread_id": thread_id,
                                   "run_dir": str(run_dir), "how": how}))
            return
        typer.echo(printable(f"{how} {run_id} · thread {thread_id} · {run_dir}"), err=True)
        if self.mode == "live":
            from rich.console import Console
            from rich.live import Live

            self.live = Live(get_renderable=self._table, refresh_per_second=4, transient=True,
                             console=Console(file=terminal(err=True)))
            self.live.start()

    def __call__(self, event: RunEvent) -> None:
        if self.mode == "json":
            typer.echo(json.dumps(event.to_json(), default=str))
            return
        self._track(event)
        line = self._line(event)
        if line is not None:
            self._print(f"[{event.elapsed_s:7.1f}s] {printable(line)}")  # one line, whatever names it holds
        elif event.kind == "custom" and event.text and self.mode == "plain":
            sys.stderr.write(event.text)  # a node's own streamed text, as it comes
            sys.stderr.flush()
            self.midline = True

    def _line(self, ev: RunEvent) -> str | None:
        """The event's line (None: not one that gets a line)."""
        where = "/".join(ev.path) or ev.node or "?"
        data = ev.data
        if ev.kind == "node.start":
            return f"{where}: started"
        if ev.kind == "node.end":
            took = f" in {data['duration_s']:.1f}s" if data.get("duration_s") is not None else ""
            if data.get("error"):
                return f"{where}: failed{took}: {data['error']}"
            if data.get("interrupted"):
                return f"{where}: paused"
            keys = ", ".join(sorted(data.get("update") or {}))
            return f"{where}: done{took}" + (f" ({keys})" if keys else "")
        if ev.kind == "model.call":
            asks = data.get("tool_calls") or []
            wants = f"; calls {', '.join(asks)}" if asks else ""
            tokens = f"{data.get('input_tokens', 0):,} in / {data.get('output_tokens', 0):,} out tokens"
            took = f"{data.get('latency_s', 0):.1f}s"
            return f"{where}: model call {data.get('call', '?')} took {took} ({tokens}{wants})"
        if ev.kind == "model.progress":  # a long call: still running, and how far it got
            return f"{where}: model call {data.get('call', '?')} running for {data.get('running_s', 0):.0f}s " \
                   f"({data.get('tokens', 0):,} tokens so far)"
        if ev.kind == "tool.result":
            args = self.calls.pop((ev.path, str(data.get("tool"))), {})
            status = "ok" if data.get("ok") else "failed"
            replayed = ", replayed" if data.get("replayed") else ""
            return f"{where}: tool {data.get('tool')}({_args(args)}) {status} in {data.get('duration_s', 0):.1f}s{replayed}"
        if ev.kind == "search.decision":
            return f"{where}: decision: {data.get('decision', '?')}"
        if ev.kind == "search.branch":
            value = f" value {data['value']:.2f}" if isinstance(data.get("value"), (int, float)) else ""
            return f"{where}: branch {str(data.get('node_id') or '').split('/', 1)[-1] or '?'} " \
                   f"{data.get('event', '')}{value}"
        return None

    def _track(self, ev: RunEvent) -> None:
        """Remember what each node is doing (tool arguments for their result's line; the live table)."""
        key = "/".join(ev.path) or ev.node or "?"
        node = self.nodes.setdefault(key, {"status": "running", "since": time.monotonic(), "activity": ""})
        if ev.kind == "tool.call":
            self.calls[(ev.path, str(ev.data.get("tool")))] = ev.data.get("args") or {}
            node.update(activity=f"tool {ev.data.get('tool')}", since_activity=time.monotonic())
        elif ev.kind == "model.start":
            node.update(activity=f"model call {ev.data.get('call', '')}", since_activity=time.monotonic(), tail="")
        elif ev.kind == "token":
            node["tail"] = (node.get("tail", "") + ev.text)[-60:]
        elif ev.kind in ("model.call", "tool.result"):
            node.update(activity="", tail="")
        elif ev.kind == "node.start":
            node.update(status="running", since=time.monotonic(), activity="")
        elif ev.kind == "node.end":
            node.update(status="failed" if ev.data.get("error") else "done", activity="", tail="")

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(show_header=True, box=None)
        for column in ("node", "status", "for", "doing"):
            table.add_column(column)
        now = time.monotonic()
        for name, node in self.nodes.items():
            running = node["status"] == "running"
            doing = node.get("activity", "")
            if doing:
                doing += f" ({now - node.get('since_activity', now):.0f}s)"
                tail = " ".join(str(node.get("tail", "")).split())
                doing += f" {tail}" if tail else ""
            table.add_row(printable(name), node["status"], f"{now - node['since']:.0f}s" if running else "", printable(doing))
        return table

    def _print(self, line: str) -> None:
        if self.midline:  # end a line of streamed text first
            typer.echo("", err=True)
            self.midline = False
        if self.live is not None:
            self.live.console.print(printable(line), highlight=False, markup=False)
        else:
            typer.echo(line, err=True)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
        if self.midline:
            typer.echo("", err=True)
            self.midline = False


__all__ = ["RunPrinter"]
