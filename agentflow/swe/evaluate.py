"""The evaluation harness: does a prediction's patch resolve its task?

In a fresh sandbox per prediction: the repository at `base_commit`, the model patch applied by git alone,
every file it touched that is not library source restored (`swe.guard`), `test_patch` applied over reset
test files, then FAIL_TO_PASS and PASS_TO_PASS run with plugin autoloading off (a task's plugins are named)
and graded as SWE-bench does, stricter on FAIL_TO_PASS (`swe.report.grade`). Failing tests run once more to
flag flaky ones; grading keeps the first run. `run_prediction` is the core (repair verifies on its own
sandbox with it); `evaluate_predictions` runs many and writes the reports.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentflow.config import StrictConfig
from agentflow.errors import AgentflowError, UserError
from agentflow.executors.base import Executor, InProcessExecutor, open_executor
from agentflow.executors.types import ExecutorConfig, RemoteTaskError
from agentflow.paths import child_dir
from agentflow.rundir import RunDir, check_folder
from agentflow.sandbox.base import Sandbox, sh_command
from agentflow.sandbox.config import SandboxConfig
from agentflow.secrets import redact
from agentflow.swe.guard import restore_test_infra
from agentflow.swe.patch import apply_patch, changed_paths, is_empty_patch, parse_patch
from agentflow.swe.report import InstanceReport, grade, instance_report_json, make_summary
from agentflow.swe.shipping import Shipping, on_this_node, prepare_node, read_tree, write_tree
from agentflow.swe.tasks import Prediction, SWETask
from agentflow.swe.testrun import default_test_cmd, passed, run_tests
from agentflow.swe.workspace import EVAL_DIR, seed_workspace


class EvalConfig(StrictConfig):
    """Settings of `agentflow eval`."""

    backend: Literal["auto", "docker", "local"] = "auto"
    """Sandbox backend: docker (hardened), local (temp dir, NOT a security boundary), auto (docker if it answers)."""
    workers: int = Field(default=1, ge=1, le=64)
    """How many instances are evaluated at the same time (one sandbox each)."""
    python: str | None = None
    """Python that runs the tests in the sandbox; default: `python3` in docker, agentflow's own python locally."""
    test_timeout_s: float = Field(default=900.0, gt=0)
    """Wall-clock limit of one test run."""
    rerun_failed: bool = True
    """Run failing tests once more to flag flaky ones."""
    sandbox: SandboxConfig = Field(default_factory=lambda: SandboxConfig.model_validate({"sandbox_timeout_s": 7200.0}))
    """Settings of each sandbox."""


def sandbox_python(sandbox: Sandbox, configured: str | None = None) -> str:
    """The Python that runs the tests: `configured`, else `python3` in docker, agentflow's own python locally."""
    return configured or (shlex.quote(sys.executable) if sandbox.info().backend == "local" else "python3")


async def _reset_test_files(sandbox: Sandbox, test_patch: str) -> None:
    """Undo a model's edits to the files the test patch touches (the evaluator owns those)."""
    for path in changed_paths(test_patch):
        q = shlex.quote(path)
        await sandbox.exec(sh_command(f"if git cat-file -e HEAD:{q} 2>/dev/null; then git checkout -q HEAD -- {q}; else rm -f {q}; fi"))


async def run_prediction(
    sandbox: Sandbox,
    task: SWETask,
    patch: str | None,
    *,
    python: str | None = None,
    test_timeout_s: float = 900.0,
    rerun_failed: bool = True,
    seed: bool = True,
    run_empty: bool = False,
    logs: dict[str, str] | None = None,
) -> InstanceReport:
    """Evaluate one patch on one task in `sandbox` (empty at the start when `seed`, else already at base).
    An empty patch is not run (SWE-bench's rule) unless `run_empty` (the base state's tests: a task's check, a
    solver's start). `logs` receives each step's text; sandbox and patch errors go to `report.error`."""
    started = time.monotonic()
    logs = logs if logs is not None else {}
    report = InstanceReport(instance_id=task.instance_id, patch_is_None=patch is None, patch_exists=not is_empty_patch(patch))
    if not report.patch_exists and not run_empty:
        return report
    py = sandbox_python(sandbox, python)
    test_ids = list(dict.fromkeys([*task.FAIL_TO_PASS, *task.PASS_TO_PASS]))
    try:
        if seed:
            head = await seed_workspace(sandbox, task, python=py)
            logs["setup"] = f"workspace at {head or task.base_commit}"
        if patch is not None and report.patch_exists:
            applied = await apply_patch(sandbox, patch)
            logs["model_patch"] = applied.log
            if not applied.applied:
                problem = parse_patch(patch).problem or (applied.log.strip().splitlines() or [""])[-1][:200]
                report.error = f"model patch did not apply{f' ({problem})' if problem else ''}"
                return report
            report.restored_files = await restore_test_infra(
                sandbox, patch, test_cmd=task.test_cmd, test_ids=test_ids, files=applied.files, plugins=task.pytest_plugins)
            if report.restored_files:
                logs["restored"] = "restored from the base commit: " + ", ".join(report.restored_files)
        report.patch_successfully_applied = True
        if task.test_patch.strip():
            await _reset_test_files(sandbox, task.test_patch)
            applied_tests = await apply_patch(sandbox, task.test_patch)
            logs["test_patch"] = applied_tests.log
            if not applied_tests.applied:
                report.error = "test patch did not apply on top of the model patch"
                return report
        test_cmd = task.test_cmd or default_test_cmd(py)
        # no plugin loads because it is installed where pytest looks (an entry point on sys.path, the host's
        # plugins on the local backend): the task's are named (`testrun.test_env`, its config's `-p`)
        env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        if task.pytest_plugins:
            env["PYTEST_PLUGINS"] = ",".join(task.pytest_plugins)
        run = await run_tests(sandbox, test_ids, test_cmd=test_cmd, scratch=EVAL_DIR, timeout=test_timeout_s, env=env)
        logs["tests"] = run.log
        if run.timed_out:
            report.error = f"tests timed out after {test_timeout_s:.0f}s"
        report.tests_status, report.resolved = grade(task.FAIL_TO_PASS, task.PASS_TO_PASS, run.status)
        report.completed = True
        failing = [t for k in ("FAIL_TO_PASS", "PASS_TO_PASS") for t in report.tests_status[k]["failure"]]
        if rerun_failed and failing and not run.timed_out:
            again = await run_tests(sandbox, failing, test_cmd=test_cmd, scratch=EVAL_DIR, timeout=test_timeout_s, env=env)
            logs["tests_rerun"] = again.log
            report.flaky_tests = [t for t in failing if passed(t, again.status)]
    except UserError:
        raise  # the task itself is broken (its repository cannot be set up): the user must fix the file
    except AgentflowError as exc:
        report.error = f"{exc.__class__.__name__}: {exc}"
    finally:
        report.duration_s = round(time.monotonic() - started, 3)
    return report


async def evaluate_one(task: SWETask, prediction: Prediction, config: EvalConfig, out_dir: Path | None = None) -> InstanceReport:
    """Evaluate one prediction in a fresh sandbox; write its report and logs under `out_dir/<instance_id>/`."""
    from agentflow.sandbox import open_sandbox

    logs: dict[str, str] = {}
    if is_empty_patch(prediction.model_patch):
        report = InstanceReport(instance_id=task.instance_id, patch_is_None=prediction.model_patch is None)
    else:
        try:
            async with open_sandbox(config.backend, config.sandbox) as sandbox:
                report = await run_prediction(
                    sandbox, task, prediction.model_patch, python=config.python,
                    test_timeout_s=config.test_timeout_s, rerun_failed=config.rerun_failed, logs=logs,
                )
        except UserError:
            raise
        except AgentflowError as exc:
            report = InstanceReport(instance_id=task.instance_id, patch_exists=True, error=f"sandbox: {exc}")
    report.model_name_or_path = prediction.model_name_or_path
    if out_dir is not None:
        inst_dir = instance_dir(out_dir, prediction)
        inst_dir.mkdir(parents=True, exist_ok=True)
        files = RunDir(inst_dir)
        files.write_json("report.json", instance_report_json(report), indent=2)
        files.write_text("patch.diff", prediction.model_patch or "", code=True)
        files.write_text("run_instance.log", "\n\n".join(f"## {k}\n{v}" for k, v in logs.items()) + "\n")
    return report


def instance_dir(out_dir: Path, prediction: Prediction) -> Path:
    """`out_dir/<model>/<instance>/`, both escaped (`agentflow.paths`): inside `out_dir` and one per pair (a
    password in the model's URL masked: the folder name is as shared as the files in it)."""
    model = redact(prediction.model_name_or_path)
    return child_dir(child_dir(out_dir, model, "model_name_or_path"), prediction.instance_id, "instance_id")


def match_predictions(tasks: Sequence[SWETask], predictions: Sequence[Prediction]) -> list[tuple[SWETask, Prediction]]:
    """Pair each prediction with its task; a prediction for an unknown instance is a UserError."""
    by_id = {t.instance_id: t for t in tasks}
    unknown = [p.instance_id for p in predictions if p.instance_id not in by_id]
    if unknown:
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise UserError(f"prediction for unknown instance id {unknown[0]!r}{more}", hint="check --tasks or the predictions file")
    return [(by_id[p.instance_id], p) for p in predictions]


async def evaluate_predictions(
    tasks: Sequence[SWETask],
    predictions: Sequence[Prediction],
    config: EvalConfig | None = None,
    *,
    out_dir: str | Path | None = None,
    on_result: Callable[[InstanceReport], None] | None = None,
    executor: Executor | ExecutorConfig | None = None,
) -> dict[str, Any]:
    """Evaluate every prediction (`config.workers` at a time); return the full report:
    the SWE-bench summary fields plus `instances` (id -> per-instance report). Writes `report.json` under
    `out_dir` when given. `executor` says where evaluations run (default: in this process)."""
    if isinstance(executor, ExecutorConfig):
        async with open_executor(executor) as opened:
            return await evaluate_predictions(tasks, predictions, config, out_dir=out_dir, on_result=on_result,
                                              executor=opened)
    executor = executor or InProcessExecutor()
    shipping = Shipping(executor) if executor.remote else None
    config = config or EvalConfig()
    from agentflow.sandbox import resolve_backend

    # once, up front: no Docker is one error, not an error per instance; the report names the backend used
    config = config.model_copy(update={"backend": await asyncio.to_thread(resolve_backend, config.backend)})
    pairs = match_predictions(tasks, predictions)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        check_folder(out)
    for _, pred in pairs:  # every id must name a folder before anything runs
        instance_dir(out or Path("."), pred)
    gate = asyncio.Semaphore(config.workers)

    async def one(task: SWETask, pred: Prediction) -> InstanceReport:
        async with gate:
            report = await evaluate_via(executor, shipping, task, pred, config, out)
        if on_result is not None:
            on_result(report)
        return report

    reports = list(await asyncio.gather(*(one(t, p) for t, p in pairs)))
    full = make_summary(tasks, predictions, reports)
    full["sandbox_backend"] = config.backend
    full["instances"] = {r.instance_id: r.model_dump(mode="json") for r in sorted(reports, key=lambda r: r.instance_id)}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        RunDir(out).write_json("report.json", full, indent=2)
    return full


# ---------------------------------------------------------------- on an executor (`eval --executor ray`)


class EvalResult(BaseModel):
    """What a remote evaluation hands back to the driver."""

    report: InstanceReport
    files: dict[str, str] = Field(default_factory=dict)
    """Files under the eval output folder by relative path (`<model>/<instance_id>/report.json`, ...)."""


async def eval_job(task: SWETask, prediction: Prediction, config: EvalConfig,
                   repo_blob: bytes | None, wheel_blob: bytes | None) -> EvalResult:
    """Runs on a worker node: one evaluation into a scratch folder; its report and files come back."""
    task = on_this_node(task, repo_blob, wheel_blob)
    prepare_node(config.backend, config.sandbox)
    with tempfile.TemporaryDirectory(prefix="agentflow-eval-") as scratch:
        report = await evaluate_one(task, prediction, config, Path(scratch))
        files = read_tree(Path(scratch))
    return EvalResult(report=report, files=files)


async def evaluate_via(executor: Executor, shipping: Shipping | None, task: SWETask, prediction: Prediction,
                       config: EvalConfig, out_dir: Path | None) -> InstanceReport:
    """Evaluate one prediction on `executor`; its files are written under `out_dir` here, on the driver."""
    if not executor.remote:
        return await evaluate_one(task, prediction, config, out_dir)
    label = f"eval:{prediction.model_name_or_path}:{task.instance_id}"
    try:
        repo, wheels = shipping.inputs(task) if shipping is not None else (None, None)
        result = await executor.call(eval_job, task, prediction, config, repo, wheels, label=label)
    except RemoteTaskError as exc:
        return InstanceReport(instance_id=task.instance_id, patch_exists=True, error=str(exc),
                              model_name_or_path=prediction.model_name_or_path)
    if out_dir is not None:
        write_tree(out_dir, result.files)
    return result.report
