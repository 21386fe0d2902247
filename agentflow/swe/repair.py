"""Repair one task: localize -> edit (SEARCH/REPLACE) -> run tests -> keep or iterate, under a strategy.

Every edit attempt is a node of a search tree (a linear run is a chain): it starts from its parent's
patch, shows the model the localized code windows (with line numbers), the issue and the parent's test
feedback, applies the returned SEARCH/REPLACE blocks, and verifies the resulting patch with tests.
No-op and unreadable answers are recorded and resampled, never counted as candidates. Strategies:
`single` (one chain), `best-of-n` (N chains from the base state), `mcts` (UCT over the tree of attempts).
The patch is always taken from the workspace with test files stripped (`make_patch`), whatever the model did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentflow.budget import Budget, BudgetExceeded, BudgetLimits
from agentflow.config import StrictConfig, apply_overrides, read_yaml, validate_config
from agentflow.errors import AgentflowError, ModelError, UserError
from agentflow.events import EventLog
from agentflow.models.base import ChatModel, ChatRequest, Message
from agentflow.sandbox.base import Sandbox
from agentflow.sandbox.config import SandboxConfig
from agentflow.swe.edits import apply_edit, parse_edits
from agentflow.swe.evaluate import run_prediction
from agentflow.swe.localize import FRAME_SCORE, rank_windows, render_window, repo_map
from agentflow.swe.patch import apply_patch, strip_test_files
from agentflow.swe.report import InstanceReport
from agentflow.swe.tasks import SWETask
from agentflow.swe.workspace import EVAL_DIR, GIT_FLAGS, seed_workspace

Strategy = Literal["single", "best-of-n", "mcts"]
STATUSES = ("submitted", "limits_exceeded", "context_exceeded", "env_error", "no_patch")


class RepairPrompts(StrictConfig):
    """Prompt templates; `{name}` fields are filled in (other braces are left alone)."""

    system: str = "You are a careful software engineer. You fix bugs with small, exact edits."
    """System message."""
    edit: str = "Fix the issue.\n\n{issue}\n\n{code}\n\n{feedback}\n\nAnswer with SEARCH/REPLACE blocks."
    """User message of an edit attempt: {issue}, {repo_map}, {code}, {feedback}, {hint}, {path} (file of the best window)."""


class RunInputs(StrictConfig):
    """What a run works on (recorded in config.resolved.yaml so the run can be repeated from it alone)."""

    repo: str | None = None
    """Repository directory (`agentflow repair`)."""
    issue: str | None = None
    """Issue text (`agentflow repair`)."""
    tasks: str | None = None
    """Tasks file (`agentflow bench`, or `agentflow repair --tasks`)."""
    instance_ids: list[str] = Field(default_factory=list)
    """Only these instances (empty: all)."""
    slice: str | None = None
    """Python-style `start:stop` slice of the tasks."""
    filter: str | None = None
    """Regular expression the instance ids must match."""


class RepairConfig(StrictConfig):
    """Settings of `agentflow repair` / `agentflow bench` (defaults: `workflows/repair.yaml`)."""

    model: str = "local:qwen2.5-coder-1.5b"
    """Model spec of the coder; `{instance_id}` in it is replaced per task (e.g. one cassette per task)."""
    strategy: Strategy = "single"
    """single: one chain of attempts; best-of-n: n chains; mcts: UCT search over attempts."""
    n: int = Field(default=4, ge=1, le=64)
    """Rollouts for best-of-n; for mcts the search makes n * max_attempts expansions."""
    max_attempts: int = Field(default=3, ge=1, le=20)
    """Edit attempts in one rollout (each after the previous one's test feedback)."""
    noop_retries: int = Field(default=2, ge=0, le=20)
    """Extra samples when an answer changes nothing or cannot be read (those are not candidates)."""
    stop_on_success: bool = True
    """Stop searching once a candidate passes its tests."""
    temperature: float = Field(default=0.7, ge=0)
    """Sampling temperature."""
    seed: int = 0
    """Base seed; each sample uses seed + its number, so runs are repeatable where the backend honours seeds."""
    max_tokens: int = Field(default=512, ge=16)
    """Output cap of one answer (small models can loop until the cap)."""
    stop: list[str] = Field(default_factory=lambda: ["END_EDITS"])
    """Stop sequences."""
    max_prompt_chars: int = Field(default=12000, ge=1000)
    """Prompt size cap (about 4 characters per token); code windows are dropped to stay under it."""
    windows: int = Field(default=3, ge=1, le=20)
    """Code windows shown per attempt."""
    window_lines: int = Field(default=40, ge=5)
    """Longest code window; longer functions are shown around the hit."""
    feedback: Literal["auto", "task", "repo", "none"] = "auto"
    """Tests that verify candidates: task = the task's FAIL_TO_PASS/PASS_TO_PASS with its test_patch
    (oracle tests, as in SWE-bench's assisted settings); repo = `test_cmd` on the repository as it is;
    none = no verification; auto = task when the task has FAIL_TO_PASS tests, else repo."""
    test_cmd: str | None = None
    """Test command for repo feedback (default: pytest on the whole repository)."""
    test_timeout_s: float = Field(default=300.0, gt=0)
    """Limit of one test run."""
    mcts_c: float = Field(default=1.0, ge=0)
    """UCT exploration constant."""
    backend: Literal["auto", "docker", "local"] = "auto"
    """Sandbox backend (auto: docker when the engine answers)."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """Settings of each task's sandbox."""
    budget_usd: float | None = Field(default=None, ge=0)
    """Spend limit per task (models with known prices)."""
    step_limit: int | None = Field(default=None, ge=1)
    """Model calls per task."""
    wall_time_s: float | None = Field(default=None, gt=0)
    """Wall-clock limit per task."""
    prompts: RepairPrompts = Field(default_factory=RepairPrompts)
    """Prompt templates."""
    workers: int = Field(default=1, ge=1, le=64)
    """Tasks repaired at the same time (one sandbox each)."""
    inputs: RunInputs = Field(default_factory=RunInputs)
    """What the run works on (set from the command line)."""


def load_repair_config(
    overrides: list[str] | tuple[str, ...] = (), base: dict[str, Any] | None = None
) -> RepairConfig:
    """Defaults from the shipped `workflows/repair.yaml`, then `base`, then `-c` items."""
    from agentflow.resources import data_dir

    data: dict[str, Any] = {}
    shipped = data_dir("workflows") / "repair.yaml"
    if shipped.is_file():
        data = dict(read_yaml(shipped) or {})
    data.update(base or {})
    return validate_config(RepairConfig, apply_overrides(data, overrides), source="repair config")


def _fill(template: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), template)


class Verification(BaseModel):
    passed: bool | None = None
    """True when the candidate's tests pass (None when nothing verified it)."""
    score: float = 0.0
    """Fraction of the verifying tests that pass."""
    kind: str = "none"
    tests_status: dict[str, dict[str, list[str]]] | None = None
    exit_code: int | None = None
    output: str = ""


CandidateStatus = Literal["ok", "noop", "unparsable", "apply_error"]


class Candidate(BaseModel):
    """One model answer and what came of it (a row of candidates.jsonl)."""

    instance_id: str
    candidate_id: str
    parent_id: str | None
    status: CandidateStatus
    patch: str = ""
    dropped_test_files: list[str] = Field(default_factory=list)
    edit_errors: list[str] = Field(default_factory=list)
    verification: Verification | None = None
    finish_reason: str = ""
    sample: int = 0
    answer: str = ""
    """The model's answer (first 4000 characters)."""


class InstanceOutcome(BaseModel):
    """Result of one task (instances/<id>/outcome.json; its presence marks the task done)."""

    instance_id: str
    status: str
    """submitted, limits_exceeded:<kind>, context_exceeded, env_error, no_patch."""
    model_patch: str = ""
    chosen: str | None = None
    """candidate_id of the submitted patch."""
    verification: Verification | None = None
    report: dict[str, Any] | None = None
    """SWE-bench per-instance report (resolved, tests_status, ...) of the submitted patch."""
    feedback: str = "none"
    candidates: int = 0
    samples: int = 0
    usage: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    duration_s: float = 0.0

    @property
    def infra_failure(self) -> bool:
        return self.status == "env_error"


@dataclass
class Node:
    node_id: str
    parent: Node | None
    patch: str
    feedback: str
    value: float = 0.0
    passed: bool | None = None
    depth: int = 0
    visits: int = 0
    children: list[Node] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- workbench


def _summarise_failures(output: str, limit: int) -> str:
    """The informative lines of a test log: failure headers, `E` lines, file:line locations."""
    keep = []
    in_failure = False
    for line in output.splitlines():
        s = line.strip()
        if re.match(r"^_{3,} .+ _{3,}$", s):
            in_failure = True  # a failure section: keep the test's source and the error lines
        elif s.startswith("=" * 5):
            in_failure = False
        if in_failure or s.startswith(("E ", "FAILED", "ERROR", ">")) or re.search(r"\.py:\d+", s):
            keep.append(line.rstrip())
    text = "\n".join(dict.fromkeys(keep)) or output.strip()[-limit:]
    return text if len(text) <= limit else text[:limit] + "\n..."


class Workbench:
    """A task's sandbox at base_commit: reset, restore a patch, read sources, diff, verify."""

    def __init__(self, sandbox: Sandbox, task: SWETask, cfg: RepairConfig, python: str) -> None:
        self.sandbox, self.task, self.cfg, self.python = sandbox, task, cfg, python
        self.head = "HEAD"
        self.local = sandbox.info().backend == "local"
        mode = cfg.feedback
        if mode == "auto":
            mode = "task" if task.FAIL_TO_PASS else "repo"
        self.mode = mode

    async def setup(self) -> None:
        self.head = (await seed_workspace(self.sandbox, self.task, python=self.python)) or "HEAD"

    async def reset(self) -> None:
        script = f"git {GIT_FLAGS} reset -q --hard {shlex.quote(self.head)} && git {GIT_FLAGS} clean -fdq -e {EVAL_DIR}"
        result = await self.sandbox.exec(f"sh -c {shlex.quote(script)}")
        if not result.ok:
            raise AgentflowError(f"resetting the workspace failed: {result.output.strip()[-300:]}")

    async def restore(self, patch: str) -> None:
        await self.reset()
        if patch.strip():
            applied = await apply_patch(self.sandbox, patch)
            if not applied.applied:
                raise AgentflowError(f"a candidate patch no longer applies: {applied.log[-300:]}")

    async def python_sources(self) -> dict[str, str]:
        listing = await self.sandbox.exec(
            f"sh -c {shlex.quote('git ls-files --cached --others --exclude-standard -- *.py')}"
        )
        out: dict[str, str] = {}
        for path in listing.stdout.split():
            if path.startswith(EVAL_DIR):
                continue
            with contextlib.suppress(Exception):  # an unreadable file is just not shown
                out[path] = await self.sandbox.read_file(path)
        return out

    async def diff(self) -> tuple[str, list[str]]:
        script = (
            # the scratch folder is git-excluded, so `add -A .` leaves it out (naming it in a pathspec fails)
            f"git add -A . >/dev/null 2>&1 && git -c core.quotepath=off diff --cached "
            f"--no-color --no-ext-diff {shlex.quote(self.head)}; s=$?; git reset -q >/dev/null 2>&1; exit $s"
        )
        result = await self.sandbox.exec(f"sh -c {shlex.quote(script)}")
        if not result.ok:
            raise AgentflowError(f"git diff failed: {result.output.strip()[-300:]}")
        return strip_test_files(result.stdout)

    def _test_env(self) -> dict[str, str] | None:
        return {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"} if self.local and self.cfg.test_cmd is None else None

    async def verify(self, patch: str, *, final: bool = False) -> tuple[Verification, InstanceReport | None]:
        """Run the verifying tests on base + patch (the workspace is left at base + patch)."""
        if self.mode == "task" or (final and self.task.FAIL_TO_PASS):
            await self.reset()
            logs: dict[str, str] = {}
            report = await run_prediction(
                self.sandbox,
                self.task,
                patch or None,
                python=self.python,
                test_timeout_s=self.cfg.test_timeout_s,
                rerun_failed=final,
                seed=False,
                run_empty=True,
                logs=logs,
            )
            status = report.tests_status
            total = sum(len(v) for part in status.values() for v in part.values())
            ok = len(status["FAIL_TO_PASS"]["success"]) + len(status["PASS_TO_PASS"]["success"])
            output = report.error or _summarise_failures(logs.get("tests", ""), 4000)
            verification = Verification(
                passed=report.resolved,
                score=ok / total if total else 0.0,
                kind="task_tests",
                tests_status=status,
                output=output,
            )
            await self.restore(patch)
            return verification, report
        if self.mode == "repo":
            await self.restore(patch)
            cmd = self.cfg.test_cmd or f"{self.python} -m pytest -q -p no:cacheprovider"
            result = await self.sandbox.exec(
                f"sh -c {shlex.quote(cmd)}", env=self._test_env(), timeout=self.cfg.test_timeout_s
            )
            counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|error|errors)", result.output)}
            good = counts.get("passed", 0)
            total = good + counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)
            score = 1.0 if result.ok else (good / total if total else 0.0)
            output = "" if result.ok else _summarise_failures(result.output, 4000)
            return Verification(
                passed=result.ok, score=score, kind="test_cmd", exit_code=result.exit_code, output=output
            ), None
        await self.restore(patch)
        return Verification(kind="none"), None


# ---------------------------------------------------------------------------------------------- attempts


class Repairer:
    """Runs one task's search: attempts are nodes; candidates and events are recorded as they happen."""

    def __init__(
        self,
        task: SWETask,
        cfg: RepairConfig,
        bench: Workbench,
        model: ChatModel,
        budget: Budget,
        events: EventLog,
        candidates_path: Path | None,
    ) -> None:
        self.task, self.cfg, self.bench, self.model, self.budget, self.events = (
            task,
            cfg,
            bench,
            model,
            budget,
            events,
        )
        self.candidates_path = candidates_path
        self.issue = (
            task.problem_statement + ("\n\nHints:\n" + task.hints_text if task.hints_text.strip() else "")
        ).strip()
        self.nodes: list[Node] = []
        self.candidates: list[Candidate] = []
        self.samples = 0
        self.base_score = 0.0
        """Share of the verifying tests that pass at the base commit."""
        self.focus = 0
        """Rollout number: which suspect window an attempt shows first."""
        self._focus_path: str | None = None
        self._map: str | None = None

    def _record(self, cand: Candidate) -> None:
        self.candidates.append(cand)
        if self.candidates_path is not None:
            with open(self.candidates_path, "a", encoding="utf-8") as fh:
                fh.write(cand.model_dump_json() + "\n")

    def _node_event(self, node: Node, action: str, **data: Any) -> None:
        self.events.emit(
            "search.node",
            node_id=node.node_id,
            parent_id=node.parent.node_id if node.parent else None,
            instance_id=self.task.instance_id,
            strategy=self.cfg.strategy,
            action=action,
            value=node.value,
            passed=node.passed,
            visits=node.visits,
            depth=node.depth,
            snapshot_id=None,
            usage=self.budget.used.model_dump(),
            **data,
        )

    def prompt(self, sources: dict[str, str], feedback: str, hint: str, focus: int = 0) -> list[Message]:
        """The edit prompt; `focus` rotates which window comes first (and is the example's path), so
        samples of one search look at different suspects instead of all at the top-ranked one."""
        cfg = self.cfg
        if self._map is None:
            self._map = repo_map(sources)
        issue = self.issue if len(self.issue) <= 2500 else self.issue[:2500] + "\n..."
        fb = f"Test results of the current code:\n{feedback[:1800]}" if feedback.strip() else ""
        values = {"issue": issue, "repo_map": self._map, "feedback": fb, "hint": hint, "code": "", "path": ""}
        base_len = len(_fill(cfg.prompts.system, values)) + len(_fill(cfg.prompts.edit, values))
        windows = rank_windows(sources, self.issue, feedback, max_lines=cfg.window_lines, limit=cfg.windows)
        # when tracebacks point into code, windows without a frame only distract a small model
        windows = [w for w in windows if w.score >= FRAME_SCORE] or windows
        if windows:
            first = focus % len(windows)
            windows = windows[first:] + windows[:first]
        self._focus_path = windows[0].path if windows else None
        values["path"] = windows[0].path if windows else "path/to/file.py"
        shown: list[str] = []
        for window in windows:
            text = render_window(sources[window.path], window)
            if base_len + sum(len(s) + 2 for s in shown) + len(text) > cfg.max_prompt_chars and shown:
                break
            shown.append(text)
        values["code"] = "\n\n".join(shown)
        return [
            Message.system(_fill(cfg.prompts.system, values)),
            Message.user(_fill(cfg.prompts.edit, values)),
        ]

    async def _apply_answer(
        self, text: str, default_path: str | None, *, complete: bool
    ) -> tuple[CandidateStatus, list[str]]:
        """Apply the answer's blocks to the workspace; (status, errors)."""
        parsed = parse_edits(text, complete=complete)
        if not parsed.blocks:
            return "unparsable", [parsed.problem or "no edit blocks"]
        errors = [parsed.problem] if parsed.problem else []
        changed = 0
        for number, block in enumerate(parsed.blocks, start=1):
            path = block.path or default_path
            if path is None:
                errors.append(f"block {number}: no file path before <<<<<<< SEARCH")
                continue
            try:
                content = await self.bench.sandbox.read_file(path)
                updated = apply_edit(content, block.search, block.replace)
            except Exception as exc:  # noqa: BLE001 - missing file or no match
                # small models often name the wrong file: use the one file the SEARCH lines match, if any
                found = await self._match_elsewhere(block.search, block.replace, path)
                if found is None:
                    why = str(exc) if isinstance(exc, ValueError) else "file does not exist"
                    errors.append(f"block {number} ({path}): {why}")
                    continue
                path, content, updated = found
            if updated != content:
                await self.bench.sandbox.write_file(path, updated)
                changed += 1
        if changed == 0:
            return ("apply_error" if errors else "noop"), errors
        return "ok", errors

    async def _match_elsewhere(self, search: str, replace: str, named: str) -> tuple[str, str, str] | None:
        matches = []
        for path, content in (await self.bench.python_sources()).items():
            if path == named:
                continue
            try:
                matches.append((path, content, apply_edit(content, search, replace)))
            except ValueError:
                continue
        return matches[0] if len(matches) == 1 else None

    async def attempt(self, parent: Node) -> Node | None:
        """One expansion: sample an edit from `parent` (resampling no-ops); the new node, or None."""
        hint = ""
        for retry in range(self.cfg.noop_retries + 1):
            self.budget.check()
            await self.bench.restore(parent.patch)
            sources = await self.bench.python_sources()
            messages = self.prompt(sources, parent.feedback, hint, focus=self.focus + retry)
            self.samples += 1
            cand_id = f"{self.task.instance_id}/c{self.samples}"
            request = ChatRequest(
                messages=messages,
                temperature=self.cfg.temperature,
                seed=self.cfg.seed + self.samples,
                max_tokens=self.cfg.max_tokens,
                stop=list(self.cfg.stop),
            )
            model = (
                self.model.with_node(cand_id, parent.node_id)
                if hasattr(self.model, "with_node")
                else self.model
            )
            response = await model.chat(request)
            text = response.text
            finish = response.choices[0].finish_reason if response.choices else "unknown"
            status: CandidateStatus
            status, errors = await self._apply_answer(text, self._focus_path, complete=finish != "length")
            patch, dropped = await self.bench.diff() if status == "ok" else ("", [])
            if status == "ok" and patch.strip() == parent.patch.strip():
                status = "noop"
            if status != "ok":
                cand = Candidate(
                    instance_id=self.task.instance_id,
                    candidate_id=cand_id,
                    parent_id=parent.node_id,
                    status=status,
                    edit_errors=errors,
                    finish_reason=finish,
                    sample=self.samples,
                    answer=text[:4000],
                )
                self._record(cand)
                self.events.emit(
                    "search.node",
                    node_id=cand_id,
                    parent_id=parent.node_id,
                    instance_id=self.task.instance_id,
                    strategy=self.cfg.strategy,
                    action="resample",
                    status=status,
                    value=None,
                    visits=0,
                    snapshot_id=None,
                    errors=errors[:3],
                )
                hint = (
                    "Your previous answer did not change the code"
                    + (f" ({'; '.join(errors[:2])})" if errors else "")
                    + ". Copy the SEARCH lines exactly from the code shown and change them."
                )
                continue
            verification, _ = await self.bench.verify(patch)
            node = Node(
                cand_id,
                parent,
                patch,
                verification.output,
                value=verification.score,
                passed=verification.passed,
                depth=parent.depth + 1,
            )
            parent.children.append(node)
            self.nodes.append(node)
            self._record(
                Candidate(
                    instance_id=self.task.instance_id,
                    candidate_id=cand_id,
                    parent_id=parent.node_id,
                    status="ok",
                    patch=patch,
                    dropped_test_files=dropped,
                    edit_errors=errors,
                    verification=verification,
                    finish_reason=finish,
                    sample=self.samples,
                    answer=text[:4000],
                )
            )
            self._backpropagate(node)
            self._node_event(node, "edit", status="ok", dropped_test_files=dropped)
            return node
        return None

    def _backpropagate(self, node: Node) -> None:
        current: Node | None = node
        while current is not None:
            current.visits += 1
            current.value = max(current.value, node.value)
            current = current.parent

    async def search(self) -> None:
        root_patch = ""
        verification, _ = await self.bench.verify(root_patch)
        root = Node(
            f"{self.task.instance_id}/root", None, root_patch, verification.output, value=0.0, passed=None
        )
        self.base_score = verification.score
        self._node_event(root, "root", status="base", base_passed=verification.passed)
        cfg = self.cfg
        if cfg.strategy == "mcts":
            await self._mcts(root)
            return
        rollouts = cfg.n if cfg.strategy == "best-of-n" else 1
        for rollout in range(rollouts):
            self.focus = rollout
            node = root
            for _ in range(cfg.max_attempts):
                child = await self.attempt(node)
                if child is None:
                    break
                if child.passed and cfg.stop_on_success:
                    return
                # a chain goes on from its best state: an edit that broke more tests is not built upon
                if child.value >= (self.base_score if node is root else node.value):
                    node = child
        return

    async def _mcts(self, root: Node) -> None:
        cfg = self.cfg
        for expansion in range(cfg.n * cfg.max_attempts):
            self.focus = expansion
            node = self._select(root)
            child = await self.attempt(node)
            if child is None:
                node.visits += 1  # an expansion that produced nothing still makes the node less attractive
                continue
            if child.passed and cfg.stop_on_success:
                return

    def _select(self, root: Node) -> Node:
        """UCT descent; a node may always get another child (progressive widening by visits)."""
        node = root
        while node.children and node.depth < self.cfg.max_attempts - 1:
            total = max(1, node.visits)
            explore_here = self.cfg.mcts_c * math.sqrt(math.log(total + 1) / (len(node.children) + 1))
            best = max(
                node.children,
                key=lambda c: c.value + self.cfg.mcts_c * math.sqrt(math.log(total + 1) / (c.visits + 1)),
            )
            best_score = best.value + self.cfg.mcts_c * math.sqrt(math.log(total + 1) / (best.visits + 1))
            if explore_here > best_score:
                break
            node = best
        return node

    def best(self) -> Node | None:
        with_patch = [n for n in self.nodes if n.patch.strip()]
        if not with_patch:
            return None
        return max(
            with_patch,
            key=lambda n: (bool(n.passed), n.value, -len(n.patch), -int(n.node_id.rsplit("c", 1)[-1])),
        )


# ---------------------------------------------------------------------------------------------- one task


def instance_model_spec(spec: str, instance_id: str) -> str:
    return spec.replace("{instance_id}", instance_id)


def _python_for(sandbox: Sandbox) -> str:
    return shlex.quote(sys.executable) if sandbox.info().backend == "local" else "python3"


async def repair_task(
    task: SWETask,
    cfg: RepairConfig,
    *,
    events: EventLog,
    inst_dir: Path | None = None,
    model: ChatModel | None = None,
) -> InstanceOutcome:
    """Repair one task in a fresh sandbox; write candidates.jsonl, patch.diff and outcome.json into `inst_dir`."""
    from agentflow.models.instrumented import InstrumentedModel
    from agentflow.models.spec import load_model
    from agentflow.sandbox import open_sandbox

    started = time.monotonic()
    iid = task.instance_id
    if inst_dir is not None:
        inst_dir.mkdir(parents=True, exist_ok=True)
        (inst_dir / "candidates.jsonl").write_text("")
    budget = Budget(
        BudgetLimits(usd=cfg.budget_usd, model_calls=cfg.step_limit, wall_seconds=cfg.wall_time_s)
    )
    outcome = InstanceOutcome(instance_id=iid, status="no_patch")
    events.emit("repair.start", node_id=iid, instance_id=iid, strategy=cfg.strategy, model=cfg.model)
    own_model = model is None
    inner = model or load_model(instance_model_spec(cfg.model, iid))
    instrumented = InstrumentedModel(inner, budget=budget, events=events, node_id=iid, check_budget=True)
    repairer: Repairer | None = None
    finished = False
    try:
        try:
            sandbox_cm = open_sandbox(cfg.backend, cfg.sandbox)
            sandbox = await sandbox_cm.__aenter__()
        except (AgentflowError, OSError) as exc:
            outcome.status, outcome.error = "env_error", f"sandbox: {exc}"
            finished = True
            return outcome
        try:
            bench = Workbench(sandbox, task, cfg, _python_for(sandbox))
            outcome.feedback = bench.mode
            try:
                await bench.setup()
            except (AgentflowError, OSError) as exc:  # UserError included: a task that cannot be set up
                outcome.status, outcome.error = "env_error", f"setup: {exc}"
                finished = True
                return outcome
            repairer = Repairer(
                task,
                cfg,
                bench,
                instrumented,
                budget,
                events,
                inst_dir / "candidates.jsonl" if inst_dir is not None else None,
            )
            try:
                await repairer.search()
            except BudgetExceeded as exc:
                outcome.status, outcome.error = f"limits_exceeded:{exc.kind}", str(exc)
            except ModelError as exc:
                if "context" in str(exc).lower():
                    outcome.status, outcome.error = "context_exceeded", str(exc)
                else:
                    raise
            best = repairer.best()
            if best is not None:
                outcome.model_patch, outcome.chosen = best.patch, best.node_id
                final, report = await bench.verify(best.patch, final=True)
                outcome.verification = final
                if report is None:
                    report = InstanceReport(
                        instance_id=iid,
                        patch_exists=True,
                        patch_successfully_applied=True,
                        resolved=bool(final.passed),
                        completed=final.passed is not None,
                    )
                outcome.report = report.model_dump(mode="json") | {"completed": report.completed}
                if outcome.status == "no_patch":
                    outcome.status = "submitted"
        finally:
            await sandbox_cm.__aexit__(None, None, None)
        finished = True
    except UserError:
        raise
    except AgentflowError as exc:
        if outcome.status == "no_patch" and repairer is None:
            outcome.status = "env_error"
        outcome.error = f"{exc.__class__.__name__}: {exc}"
        finished = True
    finally:
        if own_model:
            with contextlib.suppress(Exception):  # closing must not hide the outcome
                await inner.aclose()
        if repairer is not None:
            outcome.candidates = sum(1 for c in repairer.candidates if c.status == "ok")
            outcome.samples = repairer.samples
        outcome.usage = budget.used.model_dump()
        outcome.duration_s = round(time.monotonic() - started, 3)
        events.emit(
            "repair.end",
            node_id=iid,
            instance_id=iid,
            status=outcome.status,
            chosen=outcome.chosen,
            resolved=(outcome.report or {}).get("resolved"),
            error=outcome.error,
        )
        if inst_dir is not None and finished:  # an interrupted task leaves no outcome: resume redoes it
            (inst_dir / "patch.diff").write_text(outcome.model_patch)
            tmp = inst_dir / "outcome.json.tmp"
            tmp.write_text(json.dumps(outcome.model_dump(mode="json"), indent=2) + "\n")
            tmp.replace(inst_dir / "outcome.json")
    return outcome


def run_sync(coro: Any) -> Any:
    return asyncio.run(coro)
