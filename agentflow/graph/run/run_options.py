"""What `agentflow run` was started with (workflow, model, serve, sandbox, workspace, -c overrides, limits),
recorded in run.json with a MAC (`runrecord`) so a resume, fork or `--history` carries on with the same.
A record from elsewhere (its MAC does not verify) is never executed from: the command line must name it all.
What the run has done and spent is the run ledger (`ledger.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentflow.errors import UserError
from agentflow.graph.run.ledger import DIFF_FILE, RUN_FILE, USAGE_FILE, RunLedger, read_record
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
        """The options a run record holds (check the record is the user's own first: `resolve_options` does)."""
        return cls(**{k: record[k] for k in OPTION_FIELDS if record.get(k) is not None})

    def over(self, recorded: RunOptions) -> RunOptions:
        """These options where given, the recorded ones elsewhere (`-c` items after the recorded); a recorded
        value whose secret was masked must be given again."""
        self._check_masked(recorded)
        merged = {name: getattr(self, name) if getattr(self, name) is not None else getattr(recorded, name)
                  for name in ("workflow", "model", "serve", "sandbox", "workspace")}
        return replace(recorded, **merged, config=[*recorded.config, *self.config],
                       limits={**recorded.limits, **self.limits})

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
        return {"workflow": workflow, "model": self.model, "serve": self.serve, "sandbox": self.sandbox,
                "workspace": self.workspace, "config": list(self.config), "limits": dict(self.limits)}


def resolve_options(given: RunOptions, run_dir: Path | None, *, verb: str) -> RunOptions:
    """What a command executes with: `given` over the options recorded in `run_dir` when its run.json is this
    user's own, else `given` alone, which must then name the workflow. `verb`: the command's flag, for the hint."""
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
    given = (("--budget-usd", budget_usd, "usd"), ("--step-limit", step_limit, "model_calls"),
             ("--wall-time", wall_seconds, "wall_seconds"))
    for name, value, kind in given:
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
