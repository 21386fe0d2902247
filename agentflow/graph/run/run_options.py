"""What `agentflow run` was started with, recorded in run.json so a resume carries on with the same
workflow, model, sandbox, workspace, options and limits:

    runs/<run_id>/run.json     run id, thread id, workflow (an absolute path), model, serve, sandbox,
                               workspace, -c overrides, budget limits, and a MAC over them (`runrecord`)

A resume, fork or `--history` executes with `resolve_options`: what the command line gives, else what a
record of this user's own (its MAC verifies) holds. A record from elsewhere is never executed from: the
user names the workflow (and any model, sandbox or workspace) on the command line, and that is what runs.

What the run has done and spent (usage.json, patch.diff, events.jsonl, diffs/) is the library's run ledger
(`agentflow.graph.run.ledger`), kept the same way for every entry point.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentflow.errors import UserError
from agentflow.graph.run.ledger import DIFF_FILE, RUN_FILE, USAGE_FILE, RunLedger
from agentflow.runfiles import read_text
from agentflow.runrecord import verified
from agentflow.secrets import masked

OPTION_FIELDS = ("workflow", "model", "serve", "sandbox", "workspace", "config", "limits")


@dataclass(frozen=True)
class RunOptions:
    """The options of `agentflow run` that a resume reuses unless given again."""

    workflow: str | None = None
    model: str | None = None
    serve: str | None = None
    sandbox: str | None = None
    workspace: str | None = None
    config: list[str] = field(default_factory=list)
    limits: dict[str, float] = field(default_factory=dict)

    @classmethod
    def recorded(cls, record: dict[str, Any]) -> RunOptions:
        """The options a run record holds (older run.json files hold only the workflow). Check the record is
        the user's own first (`resolve_options` does)."""
        known = {k: record[k] for k in OPTION_FIELDS if record.get(k) is not None}
        return cls(**known)

    def over(self, recorded: RunOptions) -> RunOptions:
        """These options where given, the recorded ones elsewhere (`-c` items are added after the recorded).
        A recorded value whose secret was masked must be given again (a UserError says which)."""
        self._check_masked(recorded)
        merged = {
            name: getattr(self, name) if getattr(self, name) is not None else getattr(recorded, name)
            for name in ("workflow", "model", "serve", "sandbox", "workspace")
        }
        return replace(
            recorded, **merged, config=[*recorded.config, *self.config], limits={**recorded.limits, **self.limits}
        )

    def _check_masked(self, recorded: RunOptions) -> None:
        if self.model is None and recorded.model is not None and masked(recorded.model):
            raise UserError("the run's model was recorded with its password redacted (run.json)",
                            hint="give it again: --model SPEC")
        given = {item.partition("=")[0] for item in self.config}
        for item in recorded.config:
            key, sep, value = item.partition("=")
            if sep and masked(value) and key not in given:
                raise UserError(f"-c {key} was recorded redacted (run.json)", hint=f"give it again: -c {key}=VALUE")

    def record(self, spec: Any) -> dict[str, Any]:
        """The JSON-able options for run.json; the workflow as the file it was loaded from (absolute)."""
        source = spec.source_path
        workflow = str(Path(source).resolve()) if source and Path(source).is_file() else self.workflow
        return {
            "workflow": workflow,
            "model": self.model,
            "serve": self.serve,
            "sandbox": self.sandbox,
            "workspace": self.workspace,
            "config": list(self.config),
            "limits": dict(self.limits),
        }


def read_record(run_dir: Path) -> dict[str, Any]:
    """run.json of `run_dir` (a regular file: never read through a link); a one-line UserError when unreadable."""
    path = run_dir / RUN_FILE
    try:
        text = read_text(path)
        data = json.loads(text) if text is not None else None
    except (OSError, ValueError, RecursionError) as exc:
        raise UserError(f"{path} cannot be read ({exc.__class__.__name__})", hint="the run folder is damaged") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a run record", hint="the run folder is damaged")
    return data


def resolve_options(given: RunOptions, run_dir: Path | None, *, verb: str) -> RunOptions:
    """What a command executes with: `given` (the command line) over the options recorded in `run_dir` when
    its run.json is this user's own (its MAC verifies under the user's run key); for a record from
    elsewhere, `given` alone, which must then name the workflow (a one-line UserError says so). `verb` is
    the command's flag (`--resume THREAD`), for the hint."""
    if run_dir is None:
        return given
    record = read_record(run_dir)
    if verified(record):
        return given.over(RunOptions.recorded(record))
    if given.workflow is None:
        raise UserError(
            f"{run_dir / RUN_FILE} is not a record of a run of yours (no valid signature from this machine's run "
            "key): the workflow, model, sandbox and workspace it names are not used",
            hint=f"give them on the command line, which is then what runs: agentflow run WORKFLOW {verb} "
            "[-m MODEL] [--sandbox KIND] [--workspace DIR]",
        )
    return given


def budget_limits(
    *, budget_usd: float | None = None, step_limit: int | None = None, wall_seconds: float | None = None
) -> dict[str, float]:
    """The run-wide limits given on the command line as BudgetLimits fields (model_calls, usd, wall_seconds)."""
    limits: dict[str, float] = {}
    for name, value, kind in (
        ("--budget-usd", budget_usd, "usd"),
        ("--step-limit", step_limit, "model_calls"),
        ("--wall-time", wall_seconds, "wall_seconds"),
    ):
        if value is None:
            continue
        if value < 0 or (kind == "model_calls" and value < 1):
            raise UserError(f"{name} must be positive, got {value}")
        limits[kind] = value
    return limits


def priced(model_spec: str) -> bool:
    """True when the model's calls have a known price (so a USD limit can trip)."""
    from agentflow.models.pricing import lookup_price
    from agentflow.models.spec import parse_spec

    spec = parse_spec(model_spec)
    return spec.scheme in ("openai", "anthropic", "litellm") and lookup_price(spec.model) is not None


__all__ = ["DIFF_FILE", "USAGE_FILE", "RunLedger", "RunOptions", "budget_limits", "priced", "read_record",
           "resolve_options"]
