"""`agentflow repair`: repair one repository (or one task) for one issue; print the patch and its verification."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from agentflow.cli.common import (
    ALLOW_PATH_OPTION,
    CONFIG_OPTION,
    JSON_OPTION,
    invoked_argv,
    new_run_id,
    parse_json_input,
    print_json,
    print_view_hint,
    stop_interrupted,
    with_output,
)
from agentflow.cli.parts.serve_flag import check_serve, sets_model
from agentflow.cli.repair.repair_options import (
    QUIET_OPTION,
    REPAIR_FLAGS,
    repair_overrides,
    run_batch_cli,
    with_repair_flags,
)
from agentflow.errors import UserError
from agentflow.events.kinds import RepairStatus


def describe(outcome: Any, out_dir: Path) -> str:
    lines = [f"status: {outcome.status}" + (f" ({outcome.error})" if outcome.error else "")]
    if not outcome.model_patch and outcome.chosen_by == "noop":
        lines.append("nothing submitted: every candidate changes only docstrings, comments or whitespace, and the "
                     "tests fail at the base commit")
    elif outcome.noop:
        lines.append("the patch changes only docstrings, comments or whitespace")
    if outcome.preflight:
        from agentflow.swe.preflight import Preflight

        lines.append("pre-flight: " + Preflight.model_validate(outcome.preflight).summary())
    v = outcome.verification
    if outcome.model_patch:
        lines += ["", outcome.model_patch.rstrip(), ""]
        report = outcome.report or {}
        if v is not None and v.kind == "task_tests" and v.tests_status:
            counts = ", ".join(f"{kind} {len(ids['success'])}/{len(ids['success']) + len(ids['failure'])} pass"
                               for kind, ids in v.tests_status.items())  # FAIL_TO_PASS, then PASS_TO_PASS
            lines.append(f"verified with the task's tests: {counts}")
        elif v is not None and v.kind == "test_cmd":
            lines.append(f"verified with the test command: exit {v.exit_code} ({'pass' if v.passed else 'fail'})")
        else:
            lines.append("not verified (no tests)")
        lines.append(f"resolved: {bool(report.get('resolved'))}")
    lines.append(f"candidates: {outcome.candidates} from {outcome.samples} samples; model calls "
                 f"{outcome.usage.get('model_calls', 0)}, tokens {outcome.usage.get('tokens', 0)}, {outcome.duration_s:.1f}s")
    lines.append(f"run: {out_dir}")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command("repair")
    @with_repair_flags
    def repair_command(
        repo: Path = typer.Argument(
            None,
            help="Repository directory to repair (its committed HEAD, or its files when it is no git repository).",
            show_default=False,
        ),
        issue: str = typer.Option(None, "--issue", help="The issue text."),
        issue_file: Path = typer.Option(None, "--issue-file", help="File holding the issue text."),
        tasks: Path = typer.Option(None, "--tasks", help="Instead of REPO and an issue: a tasks file (SWE-bench fields) ..."),
        instance_id: str = typer.Option(None, "--instance-id", "-i", help="... and the task to repair."),
        allow_paths: list[Path] = ALLOW_PATH_OPTION,
        wheelhouse: Path = typer.Option(
            None, "--wheelhouse",
            help="Folder of wheels (the tests' own dependencies) installed offline for every test run, the repair's "
            "and the grading's (each wheel in it; a task's `requirements`, when it lists any).",
        ),
        flags: dict[str, Any] = REPAIR_FLAGS,
        apply: bool = typer.Option(
            False, "--apply", help="Write the chosen patch into REPO's working tree (checked first: no .git/, no symlinks)."
        ),
        allow_exec: bool = typer.Option(False, "--allow-exec", help="With --apply: allow the patch to make files executable."),
        check: bool = typer.Option(
            False, "--check",
            help="Only the pre-flight: run the test command at the base commit in the sandbox and say whether the "
            "tests can run (and what was arranged so they do); no model is called. Exit 2 when they cannot.",
        ),
        output: Path = typer.Option(None, "-o", "--output", help="Run directory (default runs/repair-<id>)."),
        quiet: bool = QUIET_OPTION,
        as_json: bool = JSON_OPTION,
        config: list[str] = CONFIG_OPTION,
    ) -> None:
        """Repair one repository for one issue: localize, edit, test, search; print the chosen patch and how it was verified."""
        from agentflow.repair.config import load_repair_config
        from agentflow.repair.run.inputs import read_issue_file, task_for_inputs

        serve = flags.pop("serve")
        check_serve(serve)
        overrides = list(config or []) + repair_overrides(**flags)
        cfg = load_repair_config(overrides)
        if issue is not None and issue_file is not None:
            raise UserError("give either --issue or --issue-file, not both")
        if issue_file is not None:
            issue = read_issue_file(issue_file)
        inputs = cfg.inputs
        if repo is not None:
            inputs.repo, inputs.tasks, inputs.instance_ids = str(repo), None, []
        if issue is not None:
            inputs.issue = issue
        if tasks is not None:
            inputs.tasks, inputs.repo = str(tasks), None
        if instance_id is not None:
            inputs.instance_ids = [instance_id]
        if allow_paths:
            inputs.allow_paths = [str(p) for p in allow_paths]
        if wheelhouse is not None:
            inputs.wheelhouse = str(wheelhouse)
        if check and inputs.tasks is None and not (inputs.issue or "").strip():
            # a repository's check needs no issue (a task's statement, if any, orders what its pre-flight runs first)
            inputs.issue = "(pre-flight check)"
        task = task_for_inputs(inputs, apply=apply)
        if check:
            raise typer.Exit(check_preflight(task, cfg, as_json=as_json))
        out_dir = output if output is not None else Path("runs") / new_run_id("repair")
        try:
            outcome = repair_one(task, cfg, out_dir, serve=serve, model_set=sets_model(overrides), quiet=quiet)
        except KeyboardInterrupt:  # the same command on the same folder continues at the node that was cut
            stop_interrupted(f"the repair is kept in {out_dir} (a checkpoint after every node)",
                             ["agentflow", *with_output(invoked_argv(), out_dir)])
        raise typer.Exit(report_outcome(outcome, out_dir, repo=inputs.repo, apply=apply, allow_exec=allow_exec,
                                        as_json=as_json))


def check_preflight(task: Any, cfg: Any, *, as_json: bool) -> int:
    """`repair --check`: the pre-flight alone; print what it found (exit 0), or raise the UserError naming
    why the tests cannot run and the fix (exit 2)."""
    import asyncio

    from agentflow.repair.run.solve import check_task

    found = asyncio.run(check_task(task, cfg))
    if as_json:
        print_json(found.model_dump(mode="json"))
    else:
        typer.echo(found.summary())
    if not found.can_run:
        raise UserError(f"the test command cannot run at the base commit: {found.cause}", hint=found.fix)
    return 0


def report_outcome(outcome: Any, out_dir: Path, *, repo: str | None, apply: bool, allow_exec: bool,
                   as_json: bool) -> int:
    """Print a repair's outcome (and apply its patch to `repo` when asked); the exit code (1: no patch)."""
    applied = None
    if apply and outcome.model_patch:
        from agentflow.swe.tree import apply_to_tree

        applied = apply_to_tree(Path(repo or "."), outcome.model_patch, allow_exec=allow_exec)
    if as_json:
        print_json({
            **outcome.model_dump(mode="json"), "run_dir": str(out_dir),
            "applied": applied.command if applied else None,
            "diffstat": applied.diffstat if applied else None,
        })
    else:
        typer.echo(describe(outcome, out_dir))
        if apply:
            typer.echo(f"applied to {repo} with {applied.command}:\n{applied.diffstat}" if applied else "nothing to apply")
    print_view_hint(out_dir)
    return 0 if outcome.status is RepairStatus.SUBMITTED else 1


def run_repair_workflow(workflow: str, input: str | None, *, workspace: Path | None, thread_id: str | None,
                        executor: Any, serve: str | None, config: list[str], output: Path, apply: bool,
                        allow_exec: bool, as_json: bool, **flags: Any) -> int:
    """`agentflow run WORKFLOW --input {...}` for a workflow of repair node types: the same repair as
    `agentflow repair --workflow WORKFLOW`, on the task its --input names (`{"repo": DIR, "issue": TEXT}` or
    `{"tasks": FILE, "instance_id": ID}`); `-c` items and `flags` (`repair_overrides`) are the repair's settings."""
    if executor is not None:
        raise UserError(f"--executor places the steps of search nodes; {workflow} is a repair workflow",
                        hint="scale repairs out by task with `agentflow bench --executor ray`")
    if workspace is not None or thread_id is not None:
        raise UserError(f"{workflow} is a repair workflow: it works on the repository of --input, "
                        "without --workspace or --thread-id",
                        hint='--input \'{"repo": "DIR", "issue": "TEXT"}\' (--apply writes the patch to DIR)')
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.run.inputs import inputs_from_state, task_for_inputs

    state = parse_json_input(input)
    check_serve(serve)
    overrides = config + repair_overrides(workflow=workflow, **flags)
    cfg = load_repair_config(overrides)
    cfg.inputs = inputs_from_state(state)
    task = task_for_inputs(cfg.inputs, apply=apply)
    out_dir = output / new_run_id("repair")
    outcome = repair_one(task, cfg, out_dir, serve=serve, model_set=sets_model(overrides))
    return report_outcome(outcome, out_dir, repo=cfg.inputs.repo, apply=apply, allow_exec=allow_exec, as_json=as_json)


def repair_one(task: Any, cfg: Any, out_dir: Path, *, serve: str | None, model_set: bool, quiet: bool = False) -> Any:
    """Repair one task into `out_dir` (a run of one task), saying on stderr what it is doing unless `quiet`;
    its outcome."""
    from agentflow.repair.run.progress import ProgressPrinter
    from agentflow.repair.run.runs import instance_dir, read_outcome

    run_batch_cli([task], cfg, out_dir, serve=serve, model_set=model_set,
                  printer=None if quiet else ProgressPrinter())
    outcome = read_outcome(instance_dir(out_dir, task.instance_id) / "outcome.json")
    if outcome is None:  # pragma: no cover - run_batch always writes it
        raise UserError(f"the run left no outcome in {out_dir}")
    return outcome
