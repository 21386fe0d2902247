"""The task a single repair works on, from its inputs (`RunInputs`): a repository and an issue, or one task of a
tasks file. Shared by `agentflow repair` and `agentflow run <repair workflow> --input {...}`, so both accept
the same inputs and give the same errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentflow.errors import UserError
from agentflow.repair.config import RunInputs
from agentflow.swe.tasks import SWETask


def inputs_from_state(data: dict[str, Any]) -> RunInputs:
    """`--input` of `agentflow run` for a repair workflow: `{"repo": DIR, "issue": TEXT}` or `{"tasks": FILE,
    "instance_id": ID}` (`instance_ids` also accepted)."""
    data = dict(data)
    if "instance_id" in data:
        data["instance_ids"] = [data.pop("instance_id")]
    try:
        return RunInputs.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "input"
        raise UserError(
            f"--input: {where}: {err['msg']}",
            hint='a repair workflow takes {"repo": DIR, "issue": TEXT} or {"tasks": FILE, "instance_id": ID}',
        ) from None


def read_issue_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"issue file {path} not found", hint="check the path after --issue-file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"issue file {path} cannot be read ({exc.__class__.__name__})") from None


def task_for_inputs(inputs: RunInputs, *, apply: bool = False) -> SWETask:
    """The one task `inputs` name (a UserError says what is missing); `apply` needs a repository to write to."""
    from agentflow.repair.run.runs import select
    from agentflow.swe.tasks import load_tasks

    wheelhouse = _wheelhouse(inputs.wheelhouse)
    if inputs.tasks:
        all_tasks = load_tasks(inputs.tasks, allow_paths=inputs.allow_paths)
        if not inputs.instance_ids and len(all_tasks) > 1:
            raise UserError(f"{inputs.tasks} holds {len(all_tasks)} tasks; pick one with --instance-id",
                            hint="or run them all with agentflow bench")
        task = select(all_tasks, instance_ids=inputs.instance_ids or [all_tasks[0].instance_id])[0]
        if inputs.issue:
            task.problem_statement = inputs.issue
        if apply:
            raise UserError("--apply needs a REPO argument (a task's repository is not a working tree to change)")
        if wheelhouse is not None:  # named by the user, not by the (untrusted) tasks file: allowed where it is
            task.wheelhouse = str(wheelhouse)
            task.allowed_dirs = [*task.allowed_dirs, str(wheelhouse)]
        return task
    if inputs.repo:
        if not inputs.issue or not inputs.issue.strip():
            raise UserError("no issue given", hint="pass --issue TEXT or --issue-file FILE")
        from agentflow.swe.workspace import repo_task

        return repo_task(Path(inputs.repo), inputs.issue, wheelhouse=wheelhouse)
    raise UserError("no repository given", hint="agentflow repair REPO --issue TEXT (or --tasks FILE -i ID)")


def _wheelhouse(value: str | None) -> Path | None:
    """The `--wheelhouse` folder, resolved; a UserError when it is no folder of wheels."""
    if value is None:
        return None
    path = Path(value).expanduser().resolve()
    if not path.is_dir():
        raise UserError(f"--wheelhouse {value}: no such directory",
                        hint="give a folder of wheels, e.g. made by: pip download --only-binary :all: -d DIR PACKAGE")
    if not any(path.glob("*.whl")):
        raise UserError(f"--wheelhouse {value} holds no wheels (*.whl)",
                        hint="pip download --only-binary :all: -d DIR PACKAGE puts a package's wheels there")
    return path


__all__ = ["inputs_from_state", "read_issue_file", "task_for_inputs"]
