"""`agentflow bench`: repair many tasks in parallel with progress, resume and SWE-bench outputs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from agentflow.cli.common import (
    ALLOW_PATH_OPTION,
    CONFIG_OPTION,
    JSON_OPTION,
    invoked_argv,
    new_run_id,
    print_json,
    print_view_hint,
    stop_interrupted,
    terminal,
    with_output,
)
from agentflow.cli.executor_options import (
    EXECUTOR_OPTION,
    RAY_ADDRESS_OPTION,
    TASK_CPUS_OPTION,
    executor_from_flags,
)
from agentflow.cli.parts.serve_flag import check_serve, sets_model
from agentflow.cli.repair.repair_options import (
    QUIET_OPTION,
    REPAIR_FLAGS,
    repair_overrides,
    run_batch_cli,
    with_repair_flags,
)
from agentflow.errors import UserError, printable

if TYPE_CHECKING:
    from agentflow.repair.outcome import InstanceOutcome
    from agentflow.repair.run.progress import Progress, ProgressPrinter


def register(app: typer.Typer) -> None:
    @app.command("bench")
    @with_repair_flags
    def bench_command(
        tasks: Path = typer.Argument(
            ..., help="Tasks file (JSONL/JSON, SWE-bench fields).", show_default=False
        ),
        workers: int = typer.Option(
            None, "--workers", "-w", help="Tasks repaired at the same time (default 1)."
        ),
        slice_: str = typer.Option(None, "--slice", help="START:STOP slice of the tasks, e.g. 0:10."),
        filter_: str = typer.Option(None, "--filter", help="Regular expression on instance ids."),
        instance_ids: list[str] = typer.Option(
            None, "--instance-id", "-i", help="Only this instance (repeatable)."
        ),
        allow_paths: list[Path] = ALLOW_PATH_OPTION,
        resume: bool = typer.Option(
            False, "--resume", help="Continue the run in -o DIR: skip finished tasks, retry env_error ones."
        ),
        redo: bool = typer.Option(False, "--redo", help="Start the run in -o DIR over."),
        flags: dict[str, Any] = REPAIR_FLAGS,
        output: Path = typer.Option(None, "-o", "--output", help="Run directory (default runs/bench-<id>)."),
        executor: str = EXECUTOR_OPTION,
        ray_address: str = RAY_ADDRESS_OPTION,
        task_cpus: float = TASK_CPUS_OPTION,
        quiet: bool = QUIET_OPTION,
        as_json: bool = JSON_OPTION,
        config: list[str] = CONFIG_OPTION,
    ) -> None:
        """Repair every task of a tasks file; write preds.jsonl, report.json, candidates.jsonl, events.jsonl."""
        from agentflow.repair.config import load_repair_config, resumed_repair_config
        from agentflow.repair.run.progress import ProgressPrinter, RunCounts, counts_text
        from agentflow.repair.run.runs import select
        from agentflow.swe.tasks import load_tasks

        serve = flags.pop("serve")
        check_serve(serve)
        executor_cfg = executor_from_flags(executor, ray_address, task_cpus)
        if serve and executor_cfg is not None and executor_cfg.kind == "ray":
            raise UserError("--serve cannot be combined with --executor ray",
                            hint="start a model server every node reaches and pass it with --model")
        if resume and redo:
            raise UserError("give either --resume or --redo, not both")
        if (resume or redo) and output is None:
            flag = "--resume" if resume else "--redo"
            raise UserError(f"{flag} needs the run directory", hint="pass -o runs/<run_id>")
        overrides = list(config or []) + repair_overrides(**flags)
        if workers is not None:
            if workers < 1:
                raise UserError(f"--workers must be at least 1, got {workers}")
            overrides.append(f"workers={workers}")
        if resume and output is not None:
            cfg = resumed_repair_config(output, overrides)
        else:
            cfg = load_repair_config(overrides)
        cfg.inputs.tasks = str(tasks)
        if slice_ is not None:
            cfg.inputs.slice = slice_
        if filter_ is not None:
            cfg.inputs.filter = filter_
        if instance_ids:
            cfg.inputs.instance_ids = list(instance_ids)
        if allow_paths:
            cfg.inputs.allow_paths = [str(p) for p in allow_paths]
        chosen = select(load_tasks(tasks, allow_paths=cfg.inputs.allow_paths), slice_=cfg.inputs.slice,
                        pattern=cfg.inputs.filter, instance_ids=cfg.inputs.instance_ids)
        out_dir = output if output is not None else Path("runs") / new_run_id("bench")

        printer = None if quiet else ProgressPrinter()
        progress = _BatchProgress(printer, len(chosen))
        interrupted = False
        try:
            summary = run_batch_cli(chosen, cfg, out_dir, serve=serve, model_set=sets_model(overrides),
                                    resume=resume, redo=redo, on_progress=progress.report, printer=printer,
                                    executor=executor_cfg)
        except KeyboardInterrupt:  # Ctrl-C: finished tasks are in report.json; --resume skips them
            interrupted = True
        finally:
            progress.stop()
        if interrupted:
            stop_interrupted(f"the batch is kept in {out_dir} (finished tasks are not run again)",
                             resume_command(invoked_argv(), out_dir))
        short = {k: v for k, v in summary.items() if k != "instances"}
        if as_json:
            print_json({**short, "run_dir": str(out_dir)})
        else:
            typer.echo(
                counts_text(RunCounts.of(short), short["total_instances"]) + "; statuses: " + _counts(short["statuses"])
                + (f"; limits reached: {_counts(short['limits'])}" if short.get("limits") else "")
            )
            typer.echo(f"run: {out_dir}  (preds.jsonl, report.json, candidates.jsonl, events.jsonl)")
        print_view_hint(out_dir)


def _counts(counted: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counted.items()))


def resume_command(argv: list[str], out_dir: Path) -> list[str]:
    """The `bench` command that continues a batch in `out_dir`: the same arguments, with --resume (not
    --redo) and `-o OUT_DIR`."""
    kept = [arg for arg in with_output(argv, out_dir) if arg not in ("--resume", "--redo")]
    return ["agentflow", *kept[:-2], "--resume", *kept[-2:]]


class _BatchProgress:
    """`bench`'s progress: a line per finished task (`ProgressPrinter.batch`) and, on a terminal, a bar whose
    text is the report's counts and the estimate from finished tasks. The bar starts on the first report, after
    a `--serve` server is up."""

    def __init__(self, printer: ProgressPrinter | None, total: int) -> None:
        self.printer = printer
        self.total = total
        self.show_bar = printer is not None and sys.stderr.isatty()
        self.bar: Any = None
        self.bar_id: Any = None

    def report(self, p: Progress, outcome: InstanceOutcome | None) -> None:
        if self.printer is None:
            return
        if self.show_bar:
            if self.bar is None:
                from rich.console import Console
                from rich.progress import BarColumn, TextColumn
                from rich.progress import Progress as Bar

                self.bar = Bar(TextColumn("bench"), BarColumn(), TextColumn("{task.description}"), transient=False,
                               console=Console(file=terminal()))
                self.bar_id = self.bar.add_task("", total=self.total)
                self.bar.start()
            text = printable(self.printer.batch_text(p))
            self.bar.update(self.bar_id, completed=p.counts.done, description=text)
            if outcome is None:
                return
        self.printer.batch(p, outcome)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
