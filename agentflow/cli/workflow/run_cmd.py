"""`agentflow run WORKFLOW`: run a workflow durably; resume, approve or edit a paused/crashed thread."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import typer
from pydantic import Field

from agentflow.cli.common import (
    CONFIG_OPTION,
    JSON_OPTION,
    new_run_id,
    parse_json_input,
    print_view_hint,
    stop_interrupted,
)
from agentflow.cli.executor_options import RAY_ADDRESS_OPTION, TASK_CPUS_OPTION, executor_from_flags
from agentflow.cli.parts.serve_flag import SERVE_OPTION, check_serve, serving
from agentflow.config import StrictConfig, load_config
from agentflow.errors import UserError, did_you_mean, printable
from agentflow.observe.config import TraceConfig

if TYPE_CHECKING:
    from agentflow.graph.run.runner import WorkflowRunner

OUTPUT_OPTION = typer.Option(Path("runs"), "-o", "--output", help="Folder that holds run directories.")
EXECUTOR_OPTION = typer.Option(
    None, "--executor", help="Where the steps of search nodes run: in-process (default) or ray (each step a Ray task "
    "on a worker node); a node's search.executor overrides it."
)


class RunConfig(StrictConfig):
    """Settings of `agentflow run` (change with -c key=value)."""

    step_limit: int | None = None
    """Most super-steps per run (overrides the workflow's step_limit)."""
    keep_last: int | None = Field(default=20, ge=1)
    """Checkpoints kept per thread (at least 1: the one just written is what a resume needs) (older ones and their unreferenced blobs are garbage-collected); null keeps all."""
    checkpointer: str = "sqlite"
    """`sqlite` (runs/<run_id>/checkpoints.db), `memory`, or a postgres:// URL (needs agentflow[postgres])."""
    durability: Literal["sync", "async", "exit"] = "sync"
    """When checkpoints are written: before the next step starts (sync), alongside it (async), at the end (exit)."""
    tools: list[str] = Field(default_factory=list)
    """Extra tool packs for tool nodes and ctx.call_tool (added to the workflow's tools:)."""
    trace: TraceConfig = Field(default_factory=TraceConfig)
    """OpenTelemetry spans of the run (`trace.endpoint`, `trace.content`); nothing is sent unless configured."""
    nodes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Settings of the workflow's typed nodes, over the YAML's (`-c nodes.refinement.code_fix=false`, a search's
    subgraph's too), and of its search nodes' `search:` (`-c nodes.refine.n=1`); validated like the YAML's own."""


def find_run(root: Path, thread_id: str) -> Path:
    """The run directory holding `thread_id`: runs/<thread_id>, or the run whose run.json names the thread
    (a record of the user's own first: a copied folder claiming the thread does not shadow it). A search
    branch's thread (`THREAD~node~b3`, as the viewer shows it) is kept in the run of its root thread."""
    from agentflow.graph.run.run_options import read_record
    from agentflow.graph.search.settings import BRANCH_SEP
    from agentflow.runrecord import verified

    unreadable: list[UserError] = []
    for wanted in dict.fromkeys((thread_id, thread_id.split(BRANCH_SEP, 1)[0])):
        direct = root / wanted
        if (direct / "run.json").is_file():
            return direct
        found = []
        for meta in sorted(root.glob("*/run.json")) if root.is_dir() else []:
            try:
                record = read_record(meta.parent)
            except UserError as exc:  # another run's damaged record does not hide this one
                unreadable.append(exc)
                continue
            if record.get("thread_id") == wanted:
                found.append((not verified(record), meta.parent))
        if found:
            return min(found)[1]
    if unreadable:  # the run may be the one whose record cannot be read: say why
        raise unreadable[0]
    raise UserError(f"no run with thread {thread_id!r} under {root}", hint="check the id and -o/--output")


def _load_tools(packs: list[str]) -> dict[str, Any]:
    if not packs:
        return {}
    from agentflow.graph.define.user_code import localize_pack
    from agentflow.tools.packs import load_pack

    # a pack file in the current folder loads too
    return {t.name: t for pack in packs for t in load_pack(localize_pack(pack, Path.cwd()))}


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_cmd(
        workflow: str | None = typer.Argument(
            None, help="YAML file or name of a shipped workflow (see workflows/); with --resume, the recorded one."
        ),
        input: str | None = typer.Option(None, "--input", "-i", help="Initial state as JSON or @file.json."),
        model: str | None = typer.Option(
            None, "--model", "-m", help="Model spec for agent nodes, e.g. openai:gpt-4o-mini (--resume: the recorded one)."
        ),
        serve: str | None = SERVE_OPTION,
        sandbox: str | None = typer.Option(
            None, "--sandbox", help="Sandbox for the agents' tools: docker, local, auto or none "
            "(default: docker when a tool or --workspace needs one)."
        ),
        workspace: Path | None = typer.Option(
            None, "--workspace", help="Folder copied into the sandbox (without .git) for the agents to work on."
        ),
        apply: bool = typer.Option(
            False, "--apply", help="When the run is done, write its diff into --workspace (checked first: no .git/, no symlinks)."
        ),
        allow_exec: bool = typer.Option(False, "--allow-exec", help="With --apply: allow the diff to make files executable."),
        budget_usd: float | None = typer.Option(None, "--budget-usd", help="Spend limit of the whole run in USD (models with known prices)."),
        step_limit: int | None = typer.Option(None, "--step-limit", help="Model calls of the whole run."),
        wall_time: str | None = typer.Option(
            None, "--wall-time", help="Wall-clock limit of the whole run, all its legs together, e.g. 90s, 30m, 1h "
            "(--resume: a new limit)."
        ),
        thread_id: str | None = typer.Option(
            None, "--thread-id", help="Thread id of a new run (default: the run id)."
        ),
        resume: str | None = typer.Option(
            None, "--resume", help="Continue this thread from its last checkpoint (with its recorded workflow, model and options)."
        ),
        approve: bool = typer.Option(
            False, "--approve", help="With --resume: approve the pending interrupt."
        ),
        edit: str | None = typer.Option(
            None, "--edit", help="With --resume or --fork: state updates (JSON or @file) applied before continuing."
        ),
        fork: str | None = typer.Option(
            None, "--fork", help="Start a new run from a checkpoint of this thread (its latest, or --at / --after), "
            "with the state and the workspace as they were there (the thread's own run is not touched)."
        ),
        at: str | None = typer.Option(None, "--at", help="With --fork: the checkpoint id (or a unique prefix; see --history)."),
        after: str | None = typer.Option(None, "--after", help="With --fork: the latest checkpoint after this node ran."),
        history: str | None = typer.Option(
            None, "--history", help="List the kept checkpoints of this thread (to fork from) and exit."
        ),
        executor: str | None = EXECUTOR_OPTION,
        ray_address: str | None = RAY_ADDRESS_OPTION,
        task_cpus: float | None = TASK_CPUS_OPTION,
        config: list[str] | None = CONFIG_OPTION,
        as_json: bool = JSON_OPTION,
        output: Path = OUTPUT_OPTION,
    ) -> int:
        """Run WORKFLOW; writes runs/<run_id>/ (run.json, config.resolved.yaml, events.jsonl, checkpoints.db,
        usage.json, patch.diff, diffs/); exit code 1 when a node fails. --fork starts a new run from a
        checkpoint of another (state and workspace as they were there); --history lists a thread's checkpoints.
        Stdout holds the result alone (the final state as JSON; with --json, the event lines and the result), so
        `run ... > state.json` keeps it; the run line, progress and hints go to stderr."""
        from agentflow.cli.repair.repair_options import parse_duration
        from agentflow.graph.run.run_options import RunOptions, budget_limits, resolve_options

        given = RunOptions(
            workflow=workflow, model=model, serve=serve, sandbox=sandbox,
            workspace=str(workspace.resolve()) if workspace is not None else None,
            config=list(config or []),
            limits=budget_limits(
                budget_usd=budget_usd, step_limit=step_limit,
                wall_seconds=parse_duration(wall_time) if wall_time is not None else None,
            ),
        )
        if history is not None:
            return _print_history(history, given, output, as_json=as_json)
        _check_run_flags(workflow, input=input, resume=resume, fork=fork, at=at, after=after, approve=approve,
                         edit=edit)
        executor_cfg = executor_from_flags(executor, ray_address, task_cpus)
        if resume is None and fork is None and workflow is not None and needs_repair(workflow):
            from agentflow.cli.repair.repair_cmd import run_repair_workflow

            return run_repair_workflow(
                workflow, input, workspace=workspace, thread_id=thread_id, executor=executor_cfg, serve=serve,
                config=list(config or []), output=output, apply=apply, allow_exec=allow_exec, as_json=as_json,
                model=model, sandbox=sandbox, budget_usd=budget_usd, step_limit=step_limit, wall_time=wall_time)
        if apply and workspace is None and resume is None and fork is None:
            raise UserError("--apply needs --workspace DIR (the folder the diff is written back to)")
        resume_dir = find_run(output, resume) if resume is not None else None
        fork_from = ForkFrom(fork, find_run(output, fork), at, after) if fork is not None else None
        recorded_dir = resume_dir or (fork_from.run_dir if fork_from is not None else None)
        # the same resolution for resume, fork and --history: the command line, else a verified record
        opts = resolve_options(given, recorded_dir,
                               verb=f"--resume {resume}" if resume is not None else f"--fork {fork}")
        cfg = load_config(RunConfig, opts.config)
        check_serve(opts.serve)
        if opts.serve and opts.model is None and executor_cfg is not None and executor_cfg.kind == "ray":
            raise UserError("--serve cannot be combined with --executor ray: the served model is this machine's",
                            hint="start a model server every node reaches and pass it with --model")
        inputs = parse_json_input(input)
        edits = parse_json_input(edit) if edit is not None else None
        spec = load_run_workflow(opts.workflow or "", cfg)
        if resume is None and fork is None:  # a bad input is refused before a run folder (and its line) exists
            from agentflow.graph.compile.compiler import initial_state

            initial_state(spec, inputs)
        check_can_start(spec, opts)

        with serving(opts.serve) as handle:
            result, run_id, rdir, applied = _run_workflow(
                spec, opts, cfg, handle=handle, inputs=inputs, edits=edits, thread_id=thread_id, resume=resume,
                resume_dir=resume_dir, fork=fork_from, approve=approve, apply=apply, allow_exec=allow_exec,
                output=output, executor=executor_cfg,
                printer_mode="json" if as_json else "live" if sys.stderr.isatty() else "plain",
            )
        return _report(result, run_id, rdir, output=output, as_json=as_json, applied=applied, limits=opts.limits)


@dataclass(frozen=True)
class ForkFrom:
    """`--fork THREAD [--at ID | --after NODE]`: the run to fork and which of its checkpoints."""

    thread_id: str
    run_dir: Path
    checkpoint_id: str | None = None
    after_node: str | None = None


def _check_run_flags(workflow: str | None, *, input: str | None, resume: str | None, fork: str | None,
                     at: str | None, after: str | None, approve: bool, edit: str | None) -> None:
    """Flags that contradict each other are refused before anything is loaded or started."""
    if fork is None and (at is not None or after is not None):
        raise UserError("--at and --after pick the checkpoint of --fork THREAD_ID")
    if fork is not None and resume is not None:
        raise UserError("--fork starts a new run from another; drop --resume (resume the fork by its own thread id)")
    if fork is not None and input is not None:
        raise UserError("--fork takes the state at the checkpoint; change it with --edit JSON, not --input")
    if at is not None and after is not None:
        raise UserError("--at and --after both pick the checkpoint: give one")
    new_run = resume is None and fork is None
    if new_run and (approve or edit is not None):
        raise UserError("--approve and --edit need --resume THREAD_ID (or --fork THREAD_ID)")
    if resume is not None and input is not None:
        raise UserError("--input starts a new run; drop it when using --resume")
    if new_run and workflow is None:
        raise UserError("missing WORKFLOW", hint="give a YAML path or a shipped workflow name, or --resume THREAD_ID")


def _print_history(thread_id: str, given: Any, output: Path, *, as_json: bool) -> int:
    """`--history THREAD`: the thread's kept checkpoints, oldest first, read from a copy of its database. The
    workflow (and model) resolved as `run` resolves them: the command line, else the run's verified record."""
    from agentflow.graph.run.history import branch_lines
    from agentflow.graph.run.run_options import resolve_options

    rdir = find_run(output, thread_id)
    opts = resolve_options(given, rdir, verb=f"--history {thread_id}")
    spec = load_run_workflow(opts.workflow or "", load_config(RunConfig, opts.config))
    with checkpoint_reader(spec, opts) as runner:
        points = asyncio.run(runner.history(thread_id, source=rdir))
    for point in points:
        if as_json:
            typer.echo(json.dumps(point.summary()))
        else:
            after = f"after {', '.join(point.after)}" if point.after else point.source
            typer.echo(printable(f"{point.checkpoint_id}  step {point.step:<3} {after:<24} next: {', '.join(point.next) or 'END'}"
                       + ("" if point.workspace_diff is None else f"  workspace {point.workspace_diff[:12]}")))
            for line in branch_lines(point.searches):
                typer.echo(printable(line))
    if not as_json:
        typer.echo(printable(f"fork one with: agentflow run -o {output} --fork {thread_id} --at CHECKPOINT_ID [--edit JSON]"))
    return 0


def needs_repair(workflow: str) -> bool:
    """Whether a workflow's nodes are repair steps (they run on a task set up by `agentflow.repair`)."""
    from agentflow.graph.compile.compiler import registry_for
    from agentflow.graph.compile.nodetypes import needed_resources
    from agentflow.graph.define.loader import load_workflow

    spec = load_workflow(workflow)
    return "repair" in needed_resources(spec, registry_for(spec))


def load_run_workflow(workflow: str, cfg: RunConfig) -> Any:
    """The workflow spec with `-c step_limit` applied, validated (a UserError names the first problem)."""
    from agentflow.graph.check.validation import check_workflow
    from agentflow.graph.define.loader import load_workflow

    spec = load_workflow(workflow)
    if cfg.step_limit is not None:
        spec.step_limit = cfg.step_limit
    settable: dict[str, Any] = {}
    for found, node in _settable_nodes(spec):
        settable.setdefault(found, node)  # a workflow's own node before a branch's of the same name
    for name, settings in cfg.nodes.items():
        node = settable.get(name)
        if node is not None and node.search is not None:  # a search node's settings are its search:
            node.search = {**dict(node.search), **settings}
            continue
        if node is None:
            typed = list(settable)
            raise UserError(f"-c nodes.{name}: {spec.name} has no typed or search node {name!r}"
                            f"{did_you_mean(name, typed)}", hint=f"its typed and search nodes: {', '.join(typed) or 'none'}")
        node.settings = {**node.settings, **settings}
    check_workflow(spec)
    return spec


def _settable_nodes(spec: Any) -> Iterator[tuple[str, Any]]:
    """The typed and search nodes `-c nodes.NAME` sets, a search's subgraph's after it (a branch's own node)."""
    for name, node in spec.nodes.items():
        if node.type or node.search is not None:
            yield name, node
        if node.subgraph is not None and hasattr(node.subgraph, "nodes"):
            yield from _settable_nodes(node.subgraph)


def check_can_start(spec: Any, opts: Any) -> None:
    """What a run needs from this machine, checked before its folder is made (a refused run leaves none): the
    run's model (a well-formed spec, a hosted one's API key, a replay cassette) and the --workspace folder.
    A USD limit cannot trip for a model without a known price: that is said before the run starts."""
    from agentflow.graph.run.run_options import priced
    from agentflow.graph.run.workspace import check_workspace
    from agentflow.models.pricing import warn_unpriced
    from agentflow.models.spec import check_can_start as check_model

    model = opts.model or (spec.model if opts.serve is None else None)
    if opts.limits.get("usd") is not None and (model is None or not priced(model)):
        warn_unpriced(model or str(opts.serve), opts.limits["usd"])
    if model is not None:
        check_model(model)
    if opts.workspace is not None:
        check_workspace(opts.workspace)


LIMIT_OPTIONS = {"wall_seconds": "--wall-time", "usd": "--budget-usd", "model_calls": "--step-limit"}
"""The run-wide budget kinds and the `run` option that sets each (a resume takes a new value)."""


def resume_command(output: Path, thread: str, kind: str | None, limits: dict[str, float], used: Any) -> list[str]:
    """The command that continues a stopped thread and can succeed: when a run-wide limit (`kind`) stopped it
    (the spend of every leg counts against it), the limit raised to what was spent plus another leg's worth."""
    command = ["agentflow", "run", "-o", str(output), "--resume", thread]
    if kind not in LIMIT_OPTIONS or kind not in limits:
        return command
    option, limit = LIMIT_OPTIONS[kind], limits[kind]
    raised = float(getattr(used, kind, 0.0) or 0.0) + float(limit)
    if kind == "wall_seconds":
        value = f"{math.ceil(raised)}s"
    elif kind == "model_calls":
        value = str(math.ceil(raised))
    else:
        value = f"{math.ceil(raised * 100) / 100:g}"
    return [*command, option, value]


def _report(
    result: Any, run_id: str, rdir: Path, *, output: Path, as_json: bool, applied: Any = None,
    limits: dict[str, float] | None = None,
) -> int:
    """Print the outcome; the exit code is 0 (done or paused) or 1 (a node failed)."""
    errors = {node: err.model_dump() for node, err in result.errors.items()}
    summary = {
        "event": "result",
        "run_id": run_id,
        "thread_id": result.thread_id,
        "status": result.status,
        "stop_reason": result.stop_reason,
        "errors": errors,
        "finished": list(result.finished),
        "usage": result.usage.model_dump(),
        "run_dir": str(rdir),
        "state": result.state,
        "interrupt": result.interrupt,
        "applied": applied.diffstat if applied is not None else None,
    }
    if as_json:
        typer.echo(json.dumps(summary, default=str))
    elif result.status == "interrupted":  # stdout: the state alone (`run ... > state.json`); the rest: stderr
        info = result.interrupt or {}
        typer.echo(printable(f"paused at '{info.get('node')}': {info.get('message')}"), err=True)
        typer.echo(json.dumps(info.get("state") or result.state, indent=2, default=str))
        typer.echo(
            printable(f"continue with: agentflow run -o {output} --resume {result.thread_id} --approve (or --edit JSON)"),
            err=True,
        )
    else:
        typer.echo(json.dumps(result.state, indent=2, default=str))
        if applied is not None:
            typer.echo(f"applied to the workspace with {applied.command}:\n{applied.diffstat}", err=True)
        if result.status == "done":
            typer.echo(printable(f"run {run_id} done (thread {result.thread_id}) in {rdir}"), err=True)
    print_view_hint(rdir)
    if result.status == "failed":
        import shlex

        err = result.errors[result.failed_node]
        again = resume_command(output, result.thread_id, result.limit, limits or {}, result.usage)
        typer.echo(printable(
            f"agentflow: run {run_id} failed: node '{err.node}' failed ({err.reason}): {err.error} "
            f"(events in {rdir / 'events.jsonl'}; retry the node with: {shlex.join(again)})"),
            err=True,
        )
        if len(result.errors) > 1 or result.finished:  # a step of nodes at once: say how each of them ended
            failed = ", ".join(f"{e.node} ({e.reason})" for e in result.errors.values())
            typer.echo(printable(f"agentflow: in that step, failed: {failed}; finished: "
                                 f"{', '.join(result.finished) or 'none'} (a resume runs only the failed ones)"),
                       err=True)
        return 1
    return 0


def _new_run_dir(spec: Any, opts: Any, cfg: RunConfig, output: Path, thread_id: str | None,
                 inputs: dict[str, Any], forked_from: dict[str, Any] | None = None) -> tuple[str, str, Path]:
    from agentflow.rundir import RunDir
    from agentflow.runrecord import sign
    from agentflow.secrets import redact

    run_id = new_run_id(spec.name)
    thread = thread_id or run_id
    rundir = RunDir.create(output / run_id)
    meta = {"run_id": run_id, "thread_id": thread, **opts.record(spec)}
    # signed as written (redacted): the options of a later resume come from here only when the MAC verifies
    rundir.write_json("run.json", sign(redact({**meta, "forked_from": forked_from} if forked_from else meta)))
    resolved = {
        "workflow": spec.name,
        "source": spec.source_path,
        "model": opts.model or spec.model,
        **{key: getattr(opts, key) for key in ("serve", "sandbox", "workspace")
           if getattr(opts, key) is not None},
        **({"limits": opts.limits} if opts.limits else {}),
        "input": inputs,
        "run": json.loads(cfg.model_dump_json()),
    }
    rundir.write_config(resolved)
    return run_id, thread, rundir.path


def _run_workflow(spec: Any, opts: Any, cfg: RunConfig, *, handle: Any, inputs: dict[str, Any],
                  edits: dict[str, Any] | None, thread_id: str | None, resume: str | None,
                  resume_dir: Path | None, approve: bool, apply: bool, allow_exec: bool, output: Path,
                  printer_mode: str, fork: ForkFrom | None = None, executor: Any = None) -> tuple[Any, str, Path, Any]:
    """Create or find the run directory, print the thread first, and run (or resume, or fork) the workflow
    there; the library keeps the run's ledger in that folder. `handle` is a --serve server; `executor` the
    `ExecutorConfig` of --executor (where search steps run)."""
    from agentflow.budget import Budget, BudgetLimits
    from agentflow.cli.workflow.run_printer import RunPrinter
    from agentflow.graph.run.context import RunHandles
    from agentflow.graph.run.run_options import read_record
    from agentflow.graph.run.runner import WorkflowRunner
    from agentflow.graph.run.streaming import LiveEvents

    if resume is not None and resume_dir is not None:
        rdir = resume_dir
        run_id, thread = str(read_record(rdir).get("run_id") or rdir.name), resume
    elif fork is not None:
        source = {"run_id": read_record(fork.run_dir).get("run_id"), "thread_id": fork.thread_id}
        point = asyncio.run(_pick_checkpoint(spec, opts, fork, edits))  # before the run folder: a bad id makes none
        run_id, thread, rdir = _new_run_dir(spec, opts, cfg, output, thread_id, inputs,
                                            forked_from={**source, "checkpoint_id": point})
        fork = ForkFrom(fork.thread_id, fork.run_dir, point)
    else:
        run_id, thread, rdir = _new_run_dir(spec, opts, cfg, output, thread_id, inputs)
    ctx = RunHandles(tools=_load_tools(cfg.tools), model=opts.model or spec.model,
                     budget=Budget(BudgetLimits.model_validate(opts.limits)))  # the runner adds earlier legs' spend
    served = None
    if handle is not None and opts.model is None:  # --model beats --serve, which beats the workflow's model:
        from agentflow.models.spec import served_model

        served = served_model(handle)
        ctx.model, ctx.chat_model = handle.spec, served
    runner = WorkflowRunner(spec, run_dir=rdir, checkpointer=cfg.checkpointer, context=ctx, keep_last=cfg.keep_last,
                            durability=cfg.durability, sandbox=opts.sandbox, workspace=opts.workspace)
    from agentflow.observe import instrument

    events = ctx.events
    assert events is not None  # the runner keeps its ledger in `rdir`: it opened the run's events.jsonl
    instrument(events, cfg.trace)
    printer = RunPrinter(printer_mode)
    live = LiveEvents()

    def on_event(event: Any) -> None:
        for item in live(event):
            printer(item)

    async def drive() -> tuple[Any, Any]:
        """Run, resume or fork the workflow (the runner starts the sandbox with the workspace and, on resume,
        the run's earlier changes) and, with --apply, bring a done run's diff back (checked). The --serve
        server's metrics, then the --executor the search steps go to, end before the runner closes the
        run's event log."""
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(runner)
            if handle is not None:
                from agentflow.serving.metric_events import report_metrics

                if served is not None:
                    stack.push_async_callback(served.aclose)
                await stack.enter_async_context(report_metrics(handle, events, interval_s=60.0))
            if executor is not None:
                from agentflow.executors.base import open_executor

                ctx.executor = await stack.enter_async_context(open_executor(executor))
                stack.callback(setattr, ctx, "executor", None)
            if fork is not None:
                result = await runner.fork(fork.thread_id, checkpoint_id=fork.checkpoint_id, source=fork.run_dir,
                                           update=edits, new_thread_id=thread, approve=approve, on_event=on_event)
            elif resume is not None:
                result = await runner.resume(thread, approve=approve, edit=edits, on_event=on_event)
            else:
                result = await runner.start(inputs, thread_id=thread, on_event=on_event)
            patch = await runner.diff() if apply and result.status == "done" and ctx.sandbox is not None else ""
            if not patch.strip():
                return result, None
            from agentflow.swe.tree import apply_to_tree

            if opts.workspace is None:
                raise UserError("--apply needs the run's --workspace DIR")
            applied = apply_to_tree(opts.workspace, patch, allow_exec=allow_exec)
            runner.record_applied(patch)  # a later fork takes it back out of its copy of the workspace
            return result, applied

    interrupted = False
    try:
        printer.start(run_id, thread, rdir, how="resume" if resume is not None else "fork" if fork else "run")
        result, applied = asyncio.run(drive())
    except KeyboardInterrupt:  # Ctrl-C: asyncio.run has cancelled the run; its checkpoints are kept
        interrupted = True
    finally:
        printer.stop()
        runner.close()
    if interrupted:
        stop_interrupted(f"run {run_id} (thread {thread}) is kept in {rdir}",
                         ["agentflow", "run", "-o", str(output), "--resume", thread])
    return result, run_id, rdir, applied


READER_MODEL = "unused:reading-checkpoints"
"""The model spec of a runner that only reads checkpoints, when the run names none (it is never built)."""


def checkpoint_reader(spec: Any, opts: Any) -> WorkflowRunner:
    """A runner that only reads a thread's checkpoints: no sandbox, no checkpointer of its own, and the run's
    model as `run` resolves it (an agent node compiles only with a model; a reader never calls it)."""
    from agentflow.graph.run.context import RunHandles
    from agentflow.graph.run.runner import WorkflowRunner

    context = RunHandles(model=opts.model or spec.model or READER_MODEL)
    return WorkflowRunner(spec, checkpointer="memory", sandbox="none", context=context)


async def _pick_checkpoint(spec: Any, opts: Any, fork: ForkFrom, edits: dict[str, Any] | None) -> str:
    """The id of the checkpoint --fork names (a one-line UserError for an unknown thread or checkpoint, an
    --edit of an undeclared key, or a workspace folder that is no longer the one the run started from)."""
    from agentflow.graph.run.ledger import RunLedger
    from agentflow.graph.run.workspace import check_recorded_start

    with checkpoint_reader(spec, opts) as runner:
        point, _ = await runner.find_checkpoint(fork.thread_id, fork.checkpoint_id, after_node=fork.after_node,
                                                source=fork.run_dir, edit=edits)
    if opts.workspace is not None:
        check_recorded_start(opts.workspace, RunLedger(fork.run_dir).base())
    return str(point.checkpoint_id)
