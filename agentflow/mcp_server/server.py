"""`agentflow mcp serve`: agentflow's sandboxed tools as an MCP server (the `mcp` SDK's low-level server).

The served workspace is a copy of a host folder inside one sandbox (Docker by default: no network, read-only
root, capped memory/pids/disk). The tool packs act on that sandbox only; `workspace_diff` shows what changed;
`repair` and `run_workflow` run agentflow's own commands in child processes and stream their events as
progress notifications. Over HTTP the server binds loopback only and every request needs the bearer token.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agentflow.errors import ToolError, UserError
from agentflow.events import EventLog
from agentflow.events.kinds import RepairStatus
from agentflow.mcp.connection import require_sdk
from agentflow.mcp_server.boundary import check_models, confine_input, job_model
from agentflow.mcp_server.config import LOOPBACK, McpServeConfig
from agentflow.mcp_server.jobs import run_cli
from agentflow.models.base import ToolCall
from agentflow.resources import data_dir
from agentflow.tools.context import ToolContext
from agentflow.tools.registry import ToolRegistry
from agentflow.tools.result import ToolResult

SERVER_NAME = "agentflow"
REPAIR_OPTIONS = {
    "edit.format", "search.max_attempts", "search.concurrency", "plan", "critique", "rank", "reproduce", "vote",
    "sampling.temperature", "sampling.seed", "sampling.max_tokens", "windows", "limits.step_limit",
    "limits.wall_time_s", "limits.budget_usd", "tests.timeout_s",
}
"""Repair settings an MCP client may change; where the code runs (sandbox, image, backend) is not one."""
REPAIR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "issue": {"type": "string", "description": "The issue to fix, as a user would report it."},
        "strategy": {"type": "string", "enum": ["best_of_n", "mcts"], "description": "Search strategy."},
        "n": {"type": "integer", "minimum": 1, "maximum": 64, "description": "Chains of best_of_n (mcts: n * "
              "max_attempts expansions)."},
        "model": {"type": "string", "description": "Model spec of the coder: the server's (default) or one it "
                  "allows; any other is refused."},
        "test_cmd": {"type": "string", "description": "Command that runs the repository's tests."},
        "options": {
            "type": "object",
            "description": "More repair settings (workflows/repair.yaml): "
            + ", ".join(sorted(REPAIR_OPTIONS)) + ".",
            "propertyNames": {"enum": sorted(REPAIR_OPTIONS)},
            "additionalProperties": {"type": ["string", "number", "integer", "boolean"]},
        },
    },
    "required": ["issue"],
    "additionalProperties": False,
}
WORKFLOW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "workflow": {"type": "string", "description": "A shipped workflow's name, or a file the server allows."},
        "input": {"type": "object", "description": "The workflow's initial state; paths in it are relative to "
                  "the served folder and must lie inside it."},
        "model": {"type": "string", "description": "Model spec for agent nodes: the server's (default) or one "
                  "it allows; any other is refused."},
    },
    "required": ["workflow"],
    "additionalProperties": False,
}
DIFF_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


class Workspace:
    """The sandbox holding the served workspace, the tools acting on it, and the server's event log."""

    def __init__(self, cfg: McpServeConfig, sandbox: Any, registry: ToolRegistry, events: EventLog, base: str) -> None:
        self.cfg, self.sandbox, self.registry, self.events, self.base = cfg, sandbox, registry, events, base
        self.root = Path(cfg.workspace).expanduser().resolve()  # the one host folder the jobs may touch
        self.ctx = ToolContext(sandbox=sandbox, events=events)
        self.lock = asyncio.Lock()  # one sandbox command at a time: calls from several clients queue

    async def call(self, name: str, arguments: dict[str, Any], progress: Any) -> ToolResult:
        model = job_model(self.cfg, arguments) if name in ("repair", "run_workflow") else None
        if name in JOB_SCHEMAS:
            _check_arguments(name, arguments)
        if name == "workspace_diff":
            return ToolResult(text=await self.sandbox.diff(self.base) or "(no changes)")
        if name == "repair":
            return await self._repair(arguments, model, progress)
        if name == "run_workflow":
            return await self._run_workflow(arguments, model, progress)
        async with self.lock:
            return await self.registry.execute(ToolCall(id=uuid.uuid4().hex[:8], name=name, arguments=arguments),
                                               self.ctx, node_id="mcp")

    async def _repair(self, args: dict[str, Any], model: str | None, progress: Any) -> ToolResult:
        out = Path(self.cfg.runs) / f"mcp-repair-{uuid.uuid4().hex[:8]}"
        out.mkdir(parents=True)
        issue = out / "issue.md"
        issue.write_text(str(args["issue"]), encoding="utf-8")
        # --quiet: the client follows the run through the events (progress notifications), and the tail of
        # stderr, shown when the job fails, is its error
        cli = ["repair", str(self.root), "--issue-file", str(issue), "--json", "--quiet",
               "-o", str(out), "--sandbox", self.cfg.sandbox]
        if args.get("n") is not None:
            cli += ["-n", str(args["n"])]  # an integer (the schema says so)
        for flag, value in (("--strategy", args.get("strategy")), ("--model", model),
                            ("--test-cmd", args.get("test_cmd"))):
            if value is not None:
                cli.append(f"{flag}={value}")  # one argument: a value starting with '-' is no option
        for key, value in sorted((args.get("options") or {}).items()):
            if key not in REPAIR_OPTIONS:  # the schema says so too; checked here whatever the client sent
                raise ToolError(f"repair option {key!r} is not allowed; allowed: {', '.join(sorted(REPAIR_OPTIONS))}")
            cli += ["-c", f"{key}={json.dumps(value) if isinstance(value, bool) else value}"]
        job = await run_cli(cli, events_glob=(out, "**/events.jsonl"), progress=progress,
                            timeout=self.cfg.job_timeout_s)
        outcome = job.json_output()
        keep = ("status", "limit", "error", "model_patch", "report", "candidates", "samples", "duration_s", "run_dir")
        summary = {k: outcome.get(k) for k in keep if k in outcome}
        ok = outcome.get("status") == RepairStatus.SUBMITTED
        text = (outcome.get("model_patch") or "") + "\n" + json.dumps({k: v for k, v in summary.items()
                                                                       if k != "model_patch"}, default=str)
        return ToolResult(ok=ok, text=text.strip(), data=summary, error=None if ok else outcome.get("status"))

    async def _run_workflow(self, args: dict[str, Any], model: str | None, progress: Any) -> ToolResult:
        workflow = self._allowed_workflow(str(args["workflow"]))
        state = confine_input(self.root, args.get("input") or {})
        out = Path(self.cfg.runs) / f"mcp-run-{uuid.uuid4().hex[:8]}"
        cli = ["run", workflow, "--json", "-o", str(out), "--input", json.dumps(state)]
        if model:
            cli += ["--model", str(model)]
        job = await run_cli(cli, events_glob=(out, "*/events.jsonl"), progress=progress,
                            timeout=self.cfg.job_timeout_s)
        if job.code != 0:
            tail = " ".join(job.stderr.split())[-600:]
            return ToolResult.failure(f"workflow {workflow} failed (exit {job.code}): {tail}")
        result = job.json_output()
        return ToolResult(text=json.dumps({k: result.get(k) for k in ("status", "state", "interrupt", "run_dir")},
                                          default=str), data=result)

    def _allowed_workflow(self, name: str) -> str:
        allowed = {str(Path(p).resolve()) for p in self.cfg.workflows}
        if str(Path(name).resolve()) in allowed:
            return str(Path(name).resolve())
        shipped = data_dir("workflows")
        for ext in (".yaml", ".yml") if "/" not in name else ():
            if (shipped / f"{name}{ext}").is_file():  # its path: a file of that name in the cwd is not it
                return str(shipped / f"{name}{ext}")
        names = sorted(p.stem for p in shipped.glob("*.y*ml"))
        raise ToolError(
            f"workflow {name!r} is not served; shipped: {', '.join(names)}"
            + (f"; allowed files: {', '.join(sorted(allowed))}" if allowed else "")
            + " (the server's user can allow a file with --workflow)"
        )


JOB_SCHEMAS = {"workspace_diff": DIFF_SCHEMA, "repair": REPAIR_SCHEMA, "run_workflow": WORKFLOW_SCHEMA}


def _check_arguments(name: str, arguments: dict[str, Any]) -> None:
    """The arguments of a server-side tool against its schema (the pack tools are checked by the registry)."""
    from jsonschema import validators

    schema = JOB_SCHEMAS[name]
    errors = sorted(validators.validator_for(schema)(schema).iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.path) or '(arguments)'}: {e.message}" for e in errors[:5]
        )
        raise ToolError(f"invalid arguments for tool '{name}': {problems}. Fix the arguments and call again.")


def tool_list(registry: ToolRegistry) -> list[Any]:
    """The MCP tool definitions: every pack tool, then `workspace_diff`, `repair` and `run_workflow`."""
    import mcp_types as types

    return [
        *(types.Tool(name=t.name, description=t.description, input_schema=t.spec.parameters) for t in registry),
        types.Tool(name="workspace_diff", input_schema=DIFF_SCHEMA,
                   description="Unified diff of the sandbox's workspace against the folder it was copied from."),
        types.Tool(name="repair", input_schema=REPAIR_SCHEMA,
                   description="Repair the served repository for an issue (localize, edit, test, search) in its own "
                   "sandbox; returns the verified patch. Long: sends progress notifications."),
        types.Tool(name="run_workflow", input_schema=WORKFLOW_SCHEMA,
                   description="Run an agentflow workflow with an input and return its final state. Long: sends "
                   "progress notifications."),
    ]


def build_server(ws: Workspace) -> Any:
    """The low-level MCP `Server` answering tools/list and tools/call from `ws`."""
    import mcp_types as types
    from mcp.server import Server

    listed = tool_list(ws.registry)
    schemas = {t.name: t.input_schema for t in listed}

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listed)

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        name, arguments = params.name, dict(params.arguments or {})
        if name not in schemas:
            return _text_result(f"there is no tool named '{name}'; tools: {', '.join(schemas)}")

        async def progress(count: float, message: str) -> None:
            await ctx.session.report_progress(count, None, message)

        try:
            result = await ws.call(name, arguments, progress)
        except ToolError as exc:
            return _text_result(f"ToolError: {exc}")
        return _text_result(result.text, is_error=not result.ok)

    return Server(SERVER_NAME, on_list_tools=on_list_tools, on_call_tool=on_call_tool,
                  get_tool_input_schema=schemas.get)


def _text_result(text: str, *, is_error: bool = True) -> Any:
    """A tools/call answer of one text block (an error unless `is_error` is False)."""
    import mcp_types as types

    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


@asynccontextmanager
async def open_workspace(cfg: McpServeConfig) -> AsyncIterator[Workspace]:
    """Start the sandbox, copy the workspace in, snapshot it; close everything on exit."""
    from agentflow.sandbox import start_sandbox

    source = Path(cfg.workspace).expanduser()
    if not source.is_dir():
        raise UserError(f"workspace {source} is not a directory", hint="name the folder to serve")
    registry = ToolRegistry.from_packs(cfg.packs)
    log_dir = Path(cfg.runs) / f"mcp-serve-{uuid.uuid4().hex[:8]}"
    log_dir.mkdir(parents=True, exist_ok=True)
    events = EventLog(log_dir / "events.jsonl", run_id=log_dir.name, keep=False)
    sandbox = await start_sandbox(cfg.sandbox, {"sandbox_timeout_s": cfg.sandbox_timeout_s}, events=events)
    try:
        await sandbox.upload(source)
        yield Workspace(cfg, sandbox, registry, events, await sandbox.snapshot())
    finally:
        await sandbox.close()
        events.close()


async def serve(cfg: McpServeConfig) -> None:
    """Serve until the client hangs up (stdio) or the process is stopped (HTTP)."""
    require_sdk("agentflow mcp serve")
    if cfg.transport == "http" and cfg.host not in LOOPBACK:
        raise UserError(f"--host {cfg.host} is not a loopback address", hint="the server binds 127.0.0.1 only")
    check_models(cfg)
    async with open_workspace(cfg) as ws:
        server = build_server(ws)
        if cfg.transport == "stdio":
            from mcp.server.stdio import stdio_server

            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        else:
            await _serve_http(cfg, server)


async def _serve_http(cfg: McpServeConfig, server: Any) -> None:
    import uvicorn

    from agentflow.mcp_server.auth import BearerAuth, make_token, write_token

    token, generated = make_token()
    token_file = Path(cfg.token_file) if cfg.token_file else Path(cfg.runs) / "mcp-token"
    write_token(token_file, token)
    app = BearerAuth(server.streamable_http_app(host=cfg.host), token)
    config = uvicorn.Config(app, host=cfg.host, port=cfg.port, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)
    url = f"http://{cfg.host}:{cfg.port}/mcp"
    message = f"agentflow MCP server on {url} (bearer token in {token_file}, mode 0600)\n"
    if generated:  # a token the user gave is theirs already: never echo it
        message += f"token: {token}\n"
    sys.stderr.write(message)
    sys.stderr.flush()
    await http.serve()
