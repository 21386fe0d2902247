"""`agentflow tasks synth`: SWE-bench-format tasks from a repository and its own test suite."""

from __future__ import annotations

from pathlib import Path

import typer

from agentflow.cli.common import CONFIG_OPTION, JSON_OPTION, check_sandbox, config_with_flags, print_json


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="Make task sets (SWE-bench format).", no_args_is_help=True)
    app.add_typer(sub, name="tasks")

    @sub.command("synth")
    def synth(
        repo: Path = typer.Argument(..., help="Folder of a Python project with its own pytest suite.", show_default=False),
        output: Path = typer.Option(..., "-o", "--output", help="New folder for tasks.jsonl, gold.jsonl and repos/."),
        seed: int = typer.Option(0, "--seed", help="Orders the candidates; the same seed writes the same files."),
        limit: int = typer.Option(5, "--limit", "-n", help="Tasks to make."),
        max_candidates: int = typer.Option(40, "--max-candidates", help="Candidate bugs to try at most (a test run each)."),
        max_failing: int = typer.Option(10, "--max-failing", help="Keep a bug when 1 to this many tests fail."),
        operators: list[str] = typer.Option(None, "--operator", help="Operator family to use (repeatable; default all)."),
        statement: str = typer.Option("mixed", "--statement", help="Problem statements: test, behaviour or mixed."),
        name: str = typer.Option(None, "--name", help="Package name in instance ids (default: the folder's name)."),
        version: str = typer.Option("", "--version", help="The tasks' version field."),
        sandbox: str = typer.Option("docker", "--sandbox", help="Where the tests run: docker, local or auto."),
        candidate_timeout: float = typer.Option(None, "--candidate-timeout", help="Seconds per candidate's test run (default 3x the suite's, >= 30)."),
        rewrite_model: str = typer.Option(None, "--rewrite-model", help="Model spec that also writes bug rewrites (off by default)."),
        rewrites: int = typer.Option(3, "--rewrites", help="Functions the rewrite model is asked to break."),
        hide_tests: bool = typer.Option(False, "--hide-tests", help="Hide the failing tests as SWE-bench does: cut from the "
                                        "repository (its suite passes at the base), put back at grading by test_patch; "
                                        "the statement is a user's report naming no test."),
        as_json: bool = JSON_OPTION,
        config: list[str] = CONFIG_OPTION,
    ) -> None:
        """Inject single-site bugs into a repository's package (on the syntax tree), keep those its own tests
        catch with a few failing tests, check each task from a fresh copy in the sandbox, and write
        tasks.jsonl, gold.jsonl and repos/ (run `agentflow eval OUT/gold.jsonl --tasks OUT/tasks.jsonl`).
        With --hide-tests the failing tests are not in the task's repository but in its test_patch."""
        import asyncio
        import dataclasses

        from agentflow.synth.build import SynthConfig, synthesize

        check_sandbox(sandbox)
        flags = {
            "seed": ("--seed", seed), "limit": ("--limit", limit), "max_candidates": ("--max-candidates", max_candidates),
            "max_failing": ("--max-failing", max_failing), "statement": ("--statement", statement),
            "name": ("--name", name), "version": ("--version", version), "backend": ("--sandbox", sandbox),
            "candidate_timeout_s": ("--candidate-timeout", candidate_timeout),
            "rewrite_model": ("--rewrite-model", rewrite_model), "rewrites": ("--rewrites", rewrites),
            "hide_tests": ("--hide-tests", hide_tests),
        }
        if operators:
            flags["operators"] = ("--operator", list(operators))
        cfg = config_with_flags(SynthConfig, config, flags)

        def log(line: str) -> None:
            if not as_json:
                typer.echo(line, err=True)

        report = asyncio.run(synthesize(repo, output, cfg, log=log))
        if as_json:
            print_json(dataclasses.asdict(report))
            return
        dropped = ", ".join(f"{n} {why}" for why, n in sorted(report.dropped.items())) or "none"
        typer.echo(f"{len(report.tasks)} tasks in {output} ({report.tried} of {report.candidates} candidates tried; "
                   f"dropped: {dropped}; {report.duration_s}s)")
        typer.echo(f"check them: agentflow eval {output / 'gold.jsonl'} --tasks {output / 'tasks.jsonl'}")
