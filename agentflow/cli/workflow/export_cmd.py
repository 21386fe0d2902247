"""`agentflow export RUN --format parquet|verl -o OUT`: a run's model calls as training data (one parquet file)."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export_command(
        run_dir: Path = typer.Argument(..., help="A run folder of `agentflow run`, `repair` or `bench` (or one "
                                                 "events.jsonl); a bench folder exports every task."),
        fmt: str = typer.Option("parquet", "--format", "-f",
                                help="`parquet` (SkyRL-style names) or `verl` (verl's dataset and rollout names)."),
        output: Path = typer.Option(..., "-o", "--output", help="The parquet file to write."),
    ) -> None:
        """Write every model call of a run as training data: messages, token ids with the generation mask,
        log-probs, reward and group id (see docs/concepts/training-data.md)."""
        from agentflow.observe.export import export_run

        rows = export_run(run_dir, output, fmt)  # type: ignore[arg-type]
        typer.echo(f"wrote {rows} rows to {output}")
