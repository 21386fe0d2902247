"""`agentflow runs prune`: the checkpoint files of the run folders under -o cut down to what is still needed."""

from __future__ import annotations

from pathlib import Path

import typer

from agentflow.cli.common import JSON_OPTION
from agentflow.cli.workflow.run_cmd import OUTPUT_OPTION


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="Look after the run folders under -o.", no_args_is_help=True)
    app.add_typer(sub, name="runs")

    @sub.command("prune")
    def prune(
        run_dirs: list[Path] = typer.Argument(None, help="Run folders to prune (default: every run under -o).",
                                              show_default=False),
        keep_last: int = typer.Option(1, "--keep-last", help="Checkpoints kept per thread (at least 1), besides "
                                      "those a fork needs."),
        as_json: bool = JSON_OPTION,
        output: Path = OUTPUT_OPTION,
    ) -> int:
        """Keep the newest --keep-last checkpoints of every thread of each run, and always what a run still
        needs: each thread's latest checkpoint with its pending writes (a paused or stopped run, a search cut
        short, resumes from there), every checkpoint a fork was taken from (in its own run, or in another run
        under -o whose run.json names it) and each fork's first checkpoint. A run open in another process (still
        going) is skipped with a line saying so (exit 1)."""
        import json

        from agentflow.errors import UserError, printable
        from agentflow.graph.run.history import CHECKPOINT_FILE, fork_sources, prune_run

        if keep_last < 1:
            raise UserError(f"--keep-last must be at least 1 (a run resumes from its latest), got {keep_last}")
        for folder in run_dirs or []:
            if not (folder / CHECKPOINT_FILE).is_file():
                raise UserError(f"{folder} has no {CHECKPOINT_FILE}", hint="pass a run folder (see `ls runs`)")
        folders = list(run_dirs or sorted(p.parent for p in output.glob(f"*/{CHECKPOINT_FILE}")))
        # forks name their source by run id: look for them among the runs under -o and beside each run given
        roots = {output, *(folder.parent for folder in folders)}
        keep = {d.resolve(): pairs for root in roots for d, pairs in fork_sources(root).items()}
        skipped = 0
        for folder in folders:
            try:
                done = prune_run(folder, keep_last, keep.get(folder.resolve(), []))
            except UserError as exc:
                skipped += 1
                typer.echo(printable(f"{folder}: skipped: {exc}"), err=True)
                continue
            if as_json:
                typer.echo(json.dumps(done))
            else:
                typer.echo(printable(f"{folder}: {done['checkpoints_before']} -> {done['checkpoints']} checkpoints "
                                     f"({done['threads']} threads), {done['bytes_before']:,} -> {done['bytes']:,} bytes"))
        if not folders:
            typer.echo(printable(f"no run with a checkpoint file under {output}"), err=True)
        return 1 if skipped else 0
