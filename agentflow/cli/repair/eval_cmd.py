"""`agentflow eval`: evaluate SWE-bench-format predictions against task instances."""

from __future__ import annotations

from pathlib import Path

import typer

from agentflow.cli.common import (
    ALLOW_PATH_OPTION,
    CONFIG_OPTION,
    JSON_OPTION,
    check_sandbox,
    config_with_flags,
    new_run_id,
    print_json,
    print_view_hint,
)
from agentflow.cli.executor_options import (
    EXECUTOR_OPTION,
    RAY_ADDRESS_OPTION,
    TASK_CPUS_OPTION,
    executor_from_flags,
)


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_command(
        predictions: Path = typer.Argument(..., help="Predictions file (JSONL/JSON, SWE-bench format).", show_default=False),
        tasks: Path = typer.Option(..., "--tasks", "-t", help="Task instances file (JSONL/JSON, SWE-bench fields)."),
        as_json: bool = JSON_OPTION,
        workers: int = typer.Option(None, "--workers", "-w", help="Instances evaluated at the same time (default 1)."),
        sandbox: str = typer.Option(None, "--sandbox", help="Sandbox backend: docker, local or auto (default auto)."),
        output: Path = typer.Option(None, "-o", "--output", help="Directory for report.json and per-instance logs (default runs/eval-<id>)."),
        instance_ids: list[str] = typer.Option(None, "--instance-id", "-i", help="Evaluate only this instance (repeatable)."),
        allow_paths: list[Path] = ALLOW_PATH_OPTION,
        executor: str = EXECUTOR_OPTION,
        ray_address: str = RAY_ADDRESS_OPTION,
        task_cpus: float = TASK_CPUS_OPTION,
        config: list[str] = CONFIG_OPTION,
    ) -> None:
        """Evaluate predictions: apply each patch in a fresh sandbox, run FAIL_TO_PASS and PASS_TO_PASS,
        write report.json and print the summary (SWE-bench field names)."""
        import asyncio

        from agentflow.swe.evaluate import EvalConfig, evaluate_predictions
        from agentflow.swe.report import InstanceReport, format_summary
        from agentflow.swe.tasks import load_predictions, load_tasks, select_tasks

        executor_cfg = executor_from_flags(executor, ray_address, task_cpus)
        check_sandbox(sandbox)
        flags = {"workers": ("--workers", workers), "backend": ("--sandbox", sandbox)}
        cfg = config_with_flags(EvalConfig, config, {k: v for k, v in flags.items() if v[1] is not None})
        all_tasks = load_tasks(tasks, allow_paths=allow_paths or ())
        preds = load_predictions(predictions)
        if instance_ids:
            selected = select_tasks(all_tasks, instance_ids)
            wanted = {t.instance_id for t in selected}
            preds = [p for p in preds if p.instance_id in wanted]
            all_tasks = selected
        out_dir = output if output is not None else Path("runs") / new_run_id("eval")

        def progress(report: InstanceReport) -> None:
            if not as_json:
                extra = f" ({report.error})" if report.error else ""
                typer.echo(f"{report.instance_id}: {report.outcome}{extra}", err=True)

        full = asyncio.run(evaluate_predictions(all_tasks, preds, cfg, out_dir=out_dir, on_result=progress,
                                               executor=executor_cfg))
        summary = {k: v for k, v in full.items() if k != "instances"}
        if as_json:
            print_json(summary)
        else:
            typer.echo(format_summary(summary))
            typer.echo(f"report: {out_dir / 'report.json'}")
        print_view_hint(out_dir)
