"""Model, search and limit options shared by `agentflow repair` and `agentflow bench`.

Both commands take them through `with_repair_flags` (declared once, in `SHARED_OPTIONS`) and turn them into
`-c key=value` items with `repair_overrides`, appended after the user's own `-c` items: a flag beats a config file.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from agentflow.cli.common import check_sandbox
from agentflow.cli.parts.serve_flag import SERVE_OPTION
from agentflow.errors import UserError, did_you_mean

if TYPE_CHECKING:
    from agentflow.events import EventSink

SHARED_OPTIONS: dict[str, tuple[type, Any]] = {
    "strategy": (str, typer.Option(
        None, "--strategy", help="Search strategy (search.strategy): best_of_n, mcts, beam, tot or rebase (default: "
        "the workflow's search; mcts when the tests fail at the base commit).")),
    "n": (int, typer.Option(None, "-n", help="Chains of best_of_n (search.n; mcts: n * max_attempts expansions).")),
    "model": (str, typer.Option(
        None, "--model", "-m",
        help="Model spec of the coder (default local:qwen2.5-coder-1.5b); {instance_id} is replaced per task.")),
    "planner_model": (str, typer.Option(
        None, "--planner-model",
        help="Model of a planner step (roles.planner; turns the step on; -c plan=true uses --model).")),
    "critic_model": (str, typer.Option(
        None, "--critic-model", help="Model of a critic step after failed attempts (roles.critic; turns it on; "
        "-c critique=true uses --model).")),
    "verifier_model": (str, typer.Option(
        None, "--verifier-model",
        help="Model that judges the finalists when tests and vote tie (roles.verifier; turns it on).")),
    "serve": (str, SERVE_OPTION),
    "test_cmd": (str, typer.Option(
        None, "--test-cmd",
        help="Verify candidates with this command (tests.cmd; exit 0 = pass) instead of the task's tests or pytest.")),
    "budget_usd": (float, typer.Option(
        None, "--budget-usd", help="Spend limit per task, in USD (limits.budget_usd; models with known prices).")),
    "step_limit": (int, typer.Option(None, "--step-limit", help="Model calls per task (limits.step_limit).")),
    "wall_time": (str, typer.Option(
        None, "--wall-time", help="Wall-clock limit per task (limits.wall_time_s), e.g. 90s, 30m, 1h.")),
    "sandbox": (str, typer.Option(None, "--sandbox", help="Sandbox backend: docker, local or auto.")),
    "workflow": (str, typer.Option(
        None, "--workflow",
        help="Repair workflow: a shipped name (default repair) or a YAML path (see 'agentflow graph show').")),
}
"""The flags `repair` and `bench` share (parameter name -> type, Option), in the order their help lists them;
all but `serve` are settings (`repair_overrides`)."""
REPAIR_FLAGS: Any = object()
"""The default of a command's `flags` parameter: `with_repair_flags` puts the shared flags in its place."""

QUIET_OPTION = typer.Option(
    False, "--quiet", "-q",
    help="Print no progress lines (by default a line per model call, candidate, decision and task on stderr).",
)

def parse_duration(text: str) -> float:
    """`90`, `90s`, `30m`, `1h`, `1h30m` -> seconds."""
    match = re.fullmatch(
        r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text
    )
    if not text.strip() or not match or not any(match.groups()):
        raise UserError(f"--wall-time {text!r} is not a duration", hint="use e.g. 90s, 30m or 1h")
    h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return h * 3600 + m * 60 + s


def with_repair_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command` with the shared flags as parameters in place of its `flags` one; it is called with their values
    as `flags`, a dict (`repair_overrides(**flags)` maps them to `-c` items)."""
    params: list[inspect.Parameter] = []
    for param in inspect.signature(command).parameters.values():
        if param.default is not REPAIR_FLAGS:
            params.append(param)
            continue
        params += [inspect.Parameter(name, param.kind, default=option, annotation=kind)
                   for name, (kind, option) in SHARED_OPTIONS.items()]

    @functools.wraps(command)
    def with_flags(**given: Any) -> Any:
        return command(**{k: v for k, v in given.items() if k not in SHARED_OPTIONS},
                       flags={k: given[k] for k in SHARED_OPTIONS})

    with_flags.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return with_flags


def repair_overrides(
    *,
    strategy: str | None = None,
    n: int | None = None,
    model: str | None = None,
    planner_model: str | None = None,
    critic_model: str | None = None,
    verifier_model: str | None = None,
    test_cmd: str | None = None,
    budget_usd: float | None = None,
    step_limit: int | None = None,
    wall_time: str | None = None,
    sandbox: str | None = None,
    workflow: str | None = None,
) -> list[str]:
    """The `-c key=value` items the shared flags stand for (unset flags add none); bad values: UserError."""
    out: list[str] = []
    if workflow is not None:
        from agentflow.graph.define.loader import find_workflow

        out.append(f"workflow={json.dumps(str(find_workflow(workflow).resolve()) if Path(workflow).is_file() else workflow)}")
    if strategy is not None:
        from agentflow.config import strategy_spelling
        from agentflow.graph.search.settings import STRATEGIES

        known = {*STRATEGIES, "single"}  # single: an earlier spelling of best_of_n -n 1 (RepairSearchSettings warns)
        if strategy_spelling(strategy) not in known:
            raise UserError(f"--strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}"
                            f"{did_you_mean(strategy, STRATEGIES)}")
        out.append(f"search.strategy={json.dumps(strategy)}")
    if n is not None:
        if n < 1:
            raise UserError(f"-n must be at least 1, got {n}")
        out.append(f"search.n={n}")
    for flag, key, spec in (
        ("--model", "model", model),
        ("--planner-model", "roles.planner", planner_model),
        ("--critic-model", "roles.critic", critic_model),
        ("--verifier-model", "roles.verifier", verifier_model),
    ):
        if spec is not None:
            if not spec.strip():
                raise UserError(f"{flag} is empty", hint="give a model spec, e.g. openai:gpt-4o-mini")
            out.append(f"{key}={json.dumps(spec)}")  # JSON quoting keeps ':' and '#' out of YAML's hands
    if test_cmd is not None:
        out.append(f"tests.cmd={json.dumps(test_cmd)}")
        out.append("tests.feedback=repo")
    if budget_usd is not None:
        if budget_usd < 0:
            raise UserError(f"--budget-usd must not be negative, got {budget_usd}")
        out.append(f"limits.budget_usd={budget_usd}")
    if step_limit is not None:
        if step_limit < 1:
            raise UserError(f"--step-limit must be at least 1, got {step_limit}")
        out.append(f"limits.step_limit={step_limit}")
    if wall_time is not None:
        out.append(f"limits.wall_time_s={parse_duration(wall_time)}")
    check_sandbox(sandbox)
    if sandbox is not None:
        out.append(f"backend={sandbox}")
    return out


def run_batch_cli(
    tasks: Sequence[Any],
    cfg: Any,
    out_dir: Path,
    *,
    serve: str | None,
    model_set: bool,
    on_progress: Callable[[Any, Any], None] | None = None,
    printer: EventSink | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """`run_batch` for the CLI: `printer` (None with `--quiet`) says what it is doing; with `--serve`, inside a
    server stopped however the run ends, whose model becomes `cfg.model` unless the user set one (`model_set`;
    unset role models follow it) and whose metrics go to events.jsonl after each task."""
    import asyncio

    from agentflow.cli.parts.serve_flag import served_loader, serving, task_metrics
    from agentflow.repair.run.runs import run_batch

    with serving(serve) as handle:
        extra: dict[str, Any] = {}
        if handle is not None:
            if not model_set:
                cfg.model = handle.spec
            extra["model_loader"] = served_loader(handle, cfg.model_options)
        with task_metrics(handle, out_dir, on_progress) as progress:
            sinks = [printer] if printer is not None else []
            return asyncio.run(run_batch(tasks, cfg, out_dir, on_progress=progress, sinks=sinks, **extra, **kwargs))
