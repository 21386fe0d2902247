"""Repair one task: localize -> (plan) -> edit -> test -> (critique) -> choose, under a search strategy.

The steps of one attempt live in `agentflow.swe.policy` (a search `Policy`); `agentflow.search` drives it:
`single` is best-of-1, `best-of-n` runs n chains of attempts at once, `mcts` searches the tree of attempts
(UCT, concurrent expansions). Every attempt that produced a patch is a candidate; the submitted one is chosen
by tests, then (blind mode) by a majority vote over normalised patches and an optional verifier model.
The patch is always taken from the workspace with test files stripped, whatever the model did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentflow.budget import Budget, BudgetExceeded, BudgetLimits
from agentflow.config import StrictConfig, apply_overrides, read_yaml, validate_config
from agentflow.errors import AgentflowError, ModelError, UserError
from agentflow.events import EventLog
from agentflow.models.base import ChatModel
from agentflow.models.batching import SampleBatcher
from agentflow.sandbox.base import Sandbox
from agentflow.sandbox.config import SandboxConfig
from agentflow.swe.policy import Attempt, RepairPolicy, RoleModels
from agentflow.swe.report import InstanceReport
from agentflow.swe.steps import edit_format_for, issue_text, make_plan, rank_suspects, write_reproduction
from agentflow.swe.tasks import SWETask
from agentflow.swe.workbench import Verification, Workbench

Strategy = Literal["single", "best-of-n", "mcts"]
STATUSES = ("submitted", "limits_exceeded", "context_exceeded", "env_error", "no_patch")
ModelLoader = Callable[[str], ChatModel]
"""Builds a model from a spec (default: `agentflow.models.spec.load_model`; `--serve` passes its own)."""

__all__ = [
    "STATUSES", "Candidate", "InstanceOutcome", "ModelLoader", "RepairConfig", "RepairPrompts", "RunInputs",
    "Verification", "load_repair_config", "repair_task",
]


class RepairPrompts(StrictConfig):
    """Prompt templates; `{name}` fields are filled in (other braces are left alone)."""

    system: str = "You are a careful software engineer. You fix bugs with small, exact edits."
    """System message of the coder."""
    edit: str = "Fix the issue.\n\n{issue}\n\n{code}\n\n{feedback}\n\nAnswer with SEARCH/REPLACE blocks."
    """User message of an edit attempt: {issue}, {repo_map}, {code}, {feedback}, {plan}, {hint}, {path}
    (file of the first window)."""
    tools: str = "{issue}\n\n{code}\n\n{feedback}\n\nFix the issue by editing the files with your tools."
    """User message of an attempt with `edit_format: tools`: the same fields as `edit`."""
    rewrite: str = "{issue}\n\n{code}\n\nRewrite {symbol} from {path} with the bug fixed:\n```python\n{snippet}\n```"
    """User message of an attempt with `edit_format: rewrite`: {issue}, {code} (other windows), {snippet} (the
    window to rewrite, no line numbers), {symbol}, {path}, {lines}, {file} (the rest of its file, see
    `file_context_lines`), {feedback}, {plan}, {hint}, {repo_map}."""
    helper_system: str = "You are an experienced Python developer helping to fix a bug."
    """System message of the planner, critic and reproduction steps."""
    plan: str = "{issue}\n\n{code}\n\nIn two or three sentences: which function is wrong and what must change?"
    """Planner's user message: {issue}, {repo_map}, {code}."""
    critique: str = "{issue}\n\n{patch}\n\n{tests}\n\nWhat is wrong with this change, and what should be tried instead?"
    """Critic's user message: {issue}, {patch}, {tests}."""
    rank: str = "{issue}\n\n{functions}\n\nWhich function most likely holds the bug? Answer with its number."
    """Suspect ranking's user message (`rank`): {issue}, {functions} (numbered), {count}, {feedback}; the
    numbers in the answer, in order, are its ranking."""
    reproduce: str = "{issue}\n\n{code}\n\nWrite a Python script that fails with an AssertionError while the bug is present."
    """Reproduction step's user message: {issue}, {repo_map}, {api}, {code}, {previous}; the answer's first code
    block is run."""


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
    """Model spec of the coder; `{instance_id}` in any role's spec is replaced per task (e.g. one cassette each)."""
    model_options: dict[str, Any] = Field(default_factory=dict)
    """Options of every role's model (`agentflow.models.ModelOptions`: timeout_s, max_attempts, concurrency,
    ...), e.g. `-c model_options.timeout_s=900` for a busy CPU server."""
    planner_model: str | None = None
    """Model of the planner step (setting it turns the step on; `plan: true` uses the coder's model)."""
    critic_model: str | None = None
    """Model of the critic step (setting it turns the step on; `critique: true` uses the coder's model)."""
    verifier_model: str | None = None
    """Model that judges the best candidates when tests cannot tell them apart (setting it turns it on)."""
    plan: bool = False
    """Ask a planner once per task which function is wrong and what to change; the plan is shown to the coder."""
    critique: bool = False
    """After a failed attempt, ask a critic what is wrong; its notes join the next attempt's feedback."""
    reproduce: bool = True
    """Blind mode (`feedback: repo`) when the repository's tests pass at the base commit: ask for a script that
    reproduces the issue, keep it if it fails at the base commit, and score candidates by it too."""
    rank: bool = True
    """Before the search the coder ranks the heuristic's best functions (one short call); its picks follow the
    heuristic's best-scored suspect, in its order, and the heuristic's order fills the rest."""
    rank_pool: int = Field(default=8, ge=2, le=30)
    """Functions the ranking call chooses among (the heuristic's best)."""
    rank_lines: int = Field(default=15, ge=1)
    """Lines of each function shown to the ranking call (longer ones are cut, marked `...`)."""
    reproduce_attempts: int = Field(default=2, ge=1, le=5)
    """Tries at a reproduction script; each later try sees why the previous one did not count."""
    vote: bool = True
    """Among candidates the tests rank equal, prefer the patch most samples agree on (normalised)."""
    strategy: Strategy = "single"
    """single: one chain of attempts; best-of-n: n chains at once; mcts: tree search over attempts."""
    n: int = Field(default=4, ge=1, le=64)
    """Chains for best-of-n. mcts makes about n * max_attempts edit samples (ceil(n * max_attempts / mcts_k)
    expansions of mcts_k samples each), the same budget as best-of-n."""
    max_attempts: int = Field(default=3, ge=1, le=20)
    """Edit attempts in one chain (each after the previous one's test feedback); for mcts, the tree's depth."""
    noop_retries: int = Field(default=2, ge=0, le=20)
    """Extra samples when an answer changes nothing or cannot be read (those are not candidates)."""
    stop_on_success: bool = True
    """Stop drawing samples once a candidate passes tests that decide (task tests, or a failing test command)."""
    concurrency: int = Field(default=4, ge=1, le=64)
    """Model calls in flight at once (chains of best-of-n, leaves of mcts); a local server decodes them together."""
    batch_samples: int = Field(default=8, ge=1, le=64)
    """Samples of one prompt in flight at once are sent as one request with `n`, up to this many (the
    server evaluates the prompt once: ~3x faster for 8 samples on a CPU). At most the server's slots
    (llama-server `--parallel`); 1 sends every sample on its own."""
    temperature: float = Field(default=0.7, ge=0)
    """Sampling temperature."""
    seed: int = 0
    """Base seed; each sample uses seed + its number, so runs are repeatable where the backend honours seeds."""
    max_tokens: int = Field(default=512, ge=16)
    """Output cap of one answer (small models can loop until the cap)."""
    edit_format: Literal["auto", "rewrite", "search_replace", "tools"] = "auto"
    """rewrite: the model rewrites one code window (a short function, or the lines around the suspect), the
    form small models get right most often; search_replace: SEARCH/REPLACE blocks anywhere in the shown code;
    tools: the model edits the files with the editor tools (view, str_replace, insert) through its API's
    tool calling; auto: tools for models that say they call tools (OpenAI, Anthropic, LiteLLM, a serving
    profile with tool calling), else rewrite."""
    tool_steps: int = Field(default=8, ge=1, le=50)
    """edit_format tools: model calls of one edit (viewing and editing files, then a last answer)."""
    stop: list[str] = Field(default_factory=lambda: ["END_EDITS"])
    """Stop sequences of edit answers."""
    max_prompt_chars: int = Field(default=12000, ge=1000)
    """Prompt size cap (about 4 characters per token); code windows are dropped to stay under it."""
    windows: int = Field(default=3, ge=1, le=20)
    """Code windows shown per attempt."""
    context_windows: int = Field(default=0, ge=0, le=20)
    """edit_format rewrite: other windows shown as context beside the one to rewrite (each costs prompt tokens)."""
    file_context_lines: int = Field(default=80, ge=0)
    """edit_format rewrite: the rest of the rewritten window's file is shown whole when it has at most this many
    lines, else in outline (imports, module names, signatures); 0 shows none of it."""
    window_lines: int = Field(default=40, ge=5)
    """Longest code window; longer functions are shown around the hit."""
    feedback: Literal["auto", "task", "repo", "none"] = "repo"
    """Tests that verify candidates during the search. repo (blind, the default): `test_cmd` on the repository
    as it is, plus a reproduction script (`reproduce`). task: the task's FAIL_TO_PASS/PASS_TO_PASS with its
    test_patch -- hidden tests a real solver does not see (an oracle setting; never for reported resolve rates).
    none: no verification. auto: task when the task has FAIL_TO_PASS tests, else repo. Whatever the mode, the
    submitted patch is evaluated with the task's tests for the report."""
    test_cmd: str | None = None
    """Test command for repo feedback (default: pytest on the whole repository)."""
    test_timeout_s: float = Field(default=300.0, gt=0)
    """Limit of one test run."""
    mcts_k: int = Field(default=2, ge=1, le=16)
    """Samples drawn per mcts expansion."""
    mcts_c: float = Field(default=0.3, ge=0)
    """UCT exploration constant (values are in [0, 1])."""
    backend: Literal["auto", "docker", "local"] = "auto"
    """Sandbox backend (auto: docker when the engine answers)."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """Settings of each task's sandbox."""
    budget_usd: float | None = Field(default=None, ge=0)
    """Spend limit per task (models with known prices)."""
    run_budget_usd: float | None = Field(default=None, ge=0)
    """Spend limit of the whole run, across all tasks and (with `--executor ray`) all nodes: once reached, running
    tasks stop at their next model call and no further task starts (`--resume` counts what was spent)."""
    step_limit: int | None = Field(default=None, ge=1)
    """Model calls per task (every role's calls count)."""
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
    chosen_by: str | None = None
    """What decided the choice: tests, vote, verifier, or only (a single candidate)."""
    verification: Verification | None = None
    report: dict[str, Any] | None = None
    """SWE-bench per-instance report (resolved, tests_status, ...) of the submitted patch."""
    feedback: str = "none"
    reproduced: bool | None = None
    """Blind mode: whether a reproduction script that fails at the base commit was found."""
    plan: str | None = None
    ranked: list[str] = Field(default_factory=list)
    """The coder's ranking of the suspects (`path:function`, most likely first; empty without `rank`)."""
    candidates: int = 0
    samples: int = 0
    usage: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    duration_s: float = 0.0

    @property
    def infra_failure(self) -> bool:
        return self.status == "env_error"


# ---------------------------------------------------------------------------------------------- choosing


async def choose(attempts: Sequence[Attempt], cfg: RepairConfig, verifier: ChatModel | None, issue: str,
                 budget: Budget, events: EventLog) -> tuple[Attempt | None, str | None]:
    """The candidate to submit and what decided it: tests (passed, then share of tests passing), then the
    vote (patches most samples agree on), then the verifier model's judgement, then the smallest patch."""
    from agentflow.search.normalize import normalise_output
    from agentflow.search.protocols import VerifyContext
    from agentflow.search.types import Candidate as SearchCandidate
    from agentflow.search.types import NodeState
    from agentflow.search.verifiers import CriticVerifier

    pool = [a for a in attempts if a.patch.strip()]
    if not pool:
        return None, None
    if len(pool) == 1:
        return pool[0], "only"

    def tests_key(a: Attempt) -> tuple[bool, float]:
        return (a.verification.passed is True, a.verification.score)

    top_key = max(tests_key(a) for a in pool)
    top = [a for a in pool if tests_key(a) == top_key]
    decided_by = "tests"
    votes: dict[str, float] = {}
    if cfg.vote and len(top) > 1:
        keys = {a.candidate_id: normalise_output(a.patch) for a in pool}
        share = {k: sum(1 for v in keys.values() if v == k) / len(pool) for k in keys.values()}
        votes = {a.candidate_id: share[keys[a.candidate_id]] for a in top}
        if len(set(votes.values())) > 1:
            decided_by = "vote"
    judged: dict[str, float] = {}
    if verifier is not None and len(top) > 1:
        best_vote = max(votes.values(), default=0.0)
        finalists = [a for a in top if votes.get(a.candidate_id, 0.0) == best_vote][:4]
        if len(finalists) > 1:
            critic = CriticVerifier(verifier, task=issue)
            cands = [SearchCandidate(a.candidate_id, NodeState(done=True, output=a.patch)) for a in finalists]
            with contextlib.suppress(BudgetExceeded):
                results = await critic.verify(cands, VerifyContext(budget=budget, events=events))
                judged = {c.node_id: r.score for c, r in zip(cands, results, strict=True)}
                if len(set(judged.values())) > 1:
                    decided_by = "verifier"
    best = max(top, key=lambda a: (votes.get(a.candidate_id, 0.0), judged.get(a.candidate_id, 0.0),
                                   -len(a.patch), -a.sample))
    return best, decided_by


# ---------------------------------------------------------------------------------------------- one task


def instance_model_spec(spec: str, instance_id: str) -> str:
    return spec.replace("{instance_id}", instance_id)


def _python_for(sandbox: Sandbox) -> str:
    return shlex.quote(sys.executable) if sandbox.info().backend == "local" else "python3"


class _TaskEvents(EventLog):
    """The run's event log as seen by one task's search: tree node ids get the instance id in front, so the
    trees of many tasks share one events file."""

    def __init__(self, inner: EventLog, instance_id: str) -> None:
        super().__init__(None, run_id=inner.run_id)
        self.inner, self.instance_id = inner, instance_id

    def emit(self, kind: str, /, *, node_id: str | None = None, parent_id: str | None = None, **data: Any) -> Any:
        prefix = f"{self.instance_id}/"
        return self.inner.emit(kind, node_id=prefix + node_id if node_id else node_id,
                               parent_id=prefix + parent_id if parent_id else parent_id,
                               instance_id=self.instance_id, **data)


async def _search(policy: RepairPolicy, cfg: RepairConfig, base: Verification, budget: Budget,
                  events: EventLog) -> None:
    from agentflow.search import MCTS, BestOfN, FunctionVerifier
    from agentflow.search.types import Verification as SearchVerification

    def value(cand: Any) -> SearchVerification:
        v = cand.state.data.get("verification")
        return SearchVerification(score=v.score, passed=v.passed) if isinstance(v, Verification) else SearchVerification()

    verifier = FunctionVerifier(value, name="tests")
    tree_events = _TaskEvents(events, policy.iid)
    root = policy.root(base)
    if cfg.strategy == "mcts":
        expansions = math.ceil(cfg.n * cfg.max_attempts / cfg.mcts_k)
        await MCTS(policy, verifier, k=cfg.mcts_k, concurrency=max(1, cfg.concurrency // cfg.mcts_k), c=cfg.mcts_c,
                   max_depth=cfg.max_attempts, max_expansions=expansions, stop_on_solution=cfg.stop_on_success,
                   seed=cfg.seed, charge_budget=False).run(root, budget=budget, events=tree_events)
        return
    n = cfg.n if cfg.strategy == "best-of-n" else 1
    await BestOfN(policy, verifier, n=n, concurrency=min(n, cfg.concurrency), seed=cfg.seed,
                  charge_budget=False).run(root, budget=budget, events=tree_events)


async def repair_task(
    task: SWETask,
    cfg: RepairConfig,
    *,
    events: EventLog,
    inst_dir: Path | None = None,
    model: ChatModel | None = None,
    model_loader: ModelLoader | None = None,
    run_budget: Budget | None = None,
) -> InstanceOutcome:
    """Repair one task in a fresh sandbox; write candidates.jsonl, patch.diff and outcome.json into `inst_dir`.
    `model` replaces the coder's model; `model_loader` builds the models of the specs in `cfg`; the task's
    budget charges `run_budget` too (the run-wide limit, `run_budget_usd`)."""
    from agentflow.models.instrumented import InstrumentedModel
    from agentflow.models.spec import load_model
    from agentflow.sandbox import open_sandbox

    started = time.monotonic()
    iid = task.instance_id
    loader = model_loader or (lambda spec: load_model(spec, **cfg.model_options))
    if inst_dir is not None:
        inst_dir.mkdir(parents=True, exist_ok=True)
        (inst_dir / "candidates.jsonl").write_text("")
    budget = Budget(BudgetLimits(usd=cfg.budget_usd, model_calls=cfg.step_limit, wall_seconds=cfg.wall_time_s),
                    parent=run_budget)
    outcome = InstanceOutcome(instance_id=iid, status="no_patch")
    events.emit("repair.start", node_id=iid, instance_id=iid, strategy=cfg.strategy, model=cfg.model)
    owned: list[ChatModel] = []

    def role(spec: str | None, enabled: bool, coder: ChatModel) -> ChatModel | None:
        if spec is None and not enabled:
            return None
        if spec is None:
            return coder
        inner = loader(instance_model_spec(spec, iid))
        owned.append(inner)
        return InstrumentedModel(inner, budget=budget, events=events, node_id=iid, check_budget=True)

    policy: RepairPolicy | None = None
    candidates: list[Candidate] = []

    def record(cand: Candidate) -> None:
        candidates.append(cand)
        if inst_dir is not None:
            with open(inst_dir / "candidates.jsonl", "a", encoding="utf-8") as fh:
                fh.write(cand.model_dump_json() + "\n")

    finished = False
    try:
        inner = model
        if inner is None:
            inner = loader(instance_model_spec(cfg.model, iid))
            owned.append(inner)
        cfg = cfg.model_copy(update={"edit_format": edit_format_for(cfg, inner)})
        if cfg.batch_samples > 1 and cfg.strategy != "single":
            inner = SampleBatcher(inner, max_n=cfg.batch_samples)
        coder = InstrumentedModel(inner, budget=budget, events=events, node_id=iid, check_budget=True)
        models = RoleModels(
            coder,
            planner=role(cfg.planner_model, cfg.plan, coder),
            critic=role(cfg.critic_model, cfg.critique, coder),
            verifier=role(cfg.verifier_model, False, coder),
        )
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
                base = await bench.verify_base()
            except (AgentflowError, OSError) as exc:  # UserError included: a task that cannot be set up
                outcome.status, outcome.error = "env_error", f"setup: {exc}"
                finished = True
                return outcome
            issue = issue_text(task.problem_statement, task.hints_text)
            try:
                base, plan, prefer = await _prepare(bench, cfg, models, issue, base, outcome, events)
                policy = RepairPolicy(cfg, bench, models, budget, events, issue, record, plan=plan, prefer=prefer)
                events.emit("repair.base", node_id=iid, instance_id=iid, passed=base.passed, score=base.score,
                            feedback=bench.mode, reproduced=outcome.reproduced, edit_format=cfg.edit_format)
                await _search(policy, cfg, base, budget, events)
            except BudgetExceeded as exc:
                outcome.status, outcome.error = f"limits_exceeded:{exc.kind}", str(exc)
            except ModelError as exc:
                # the candidates found so far are kept; a task without any is an infrastructure failure
                # (bench --resume retries it)
                context = "context" in str(exc).lower()
                outcome.status = "context_exceeded" if context else "no_patch"
                outcome.error = f"{exc.__class__.__name__}: {exc}"
            if outcome.status == "no_patch" and (kind := budget.exceeded()) is not None:
                outcome.status = f"limits_exceeded:{kind}"
            attempts = policy.attempts if policy is not None else []
            if outcome.status == "no_patch" and outcome.error and not any(a.patch.strip() for a in attempts):
                outcome.status = "env_error"
            best, outcome.chosen_by = await choose(attempts, cfg, models.verifier, issue, budget, events)
            if best is not None:
                outcome.model_patch, outcome.chosen = best.patch, best.candidate_id
                final, report = await bench.verify(best.patch, final=True)
                outcome.verification = final
                if report is None:
                    report = InstanceReport(instance_id=iid, patch_exists=True, patch_successfully_applied=True,
                                            resolved=bool(final.passed), completed=final.passed is not None)
                outcome.report = report.model_dump(mode="json") | {"completed": report.completed}
                if outcome.status == "no_patch":
                    outcome.status = "submitted"
        finally:
            await sandbox_cm.__aexit__(None, None, None)
        finished = True
    except UserError:
        raise
    except AgentflowError as exc:
        if outcome.status == "no_patch" and policy is None:
            outcome.status = "env_error"
        outcome.error = f"{exc.__class__.__name__}: {exc}"
        finished = True
    finally:
        for owned_model in owned:
            with contextlib.suppress(Exception):  # closing must not hide the outcome
                await owned_model.aclose()
        outcome.candidates = sum(1 for c in candidates if c.status == "ok")
        outcome.samples = policy.samples if policy is not None else 0
        outcome.usage = budget.used.model_dump()
        outcome.duration_s = round(time.monotonic() - started, 3)
        events.emit("repair.end", node_id=iid, instance_id=iid, status=outcome.status, chosen=outcome.chosen,
                    chosen_by=outcome.chosen_by, resolved=(outcome.report or {}).get("resolved"), error=outcome.error)
        if inst_dir is not None and finished:  # an interrupted task leaves no outcome: resume redoes it
            (inst_dir / "patch.diff").write_text(outcome.model_patch)
            tmp = inst_dir / "outcome.json.tmp"
            tmp.write_text(json.dumps(outcome.model_dump(mode="json"), indent=2) + "\n")
            tmp.replace(inst_dir / "outcome.json")
    return outcome


async def _prepare(bench: Workbench, cfg: RepairConfig, models: RoleModels, issue: str, base: Verification,
                   outcome: InstanceOutcome, events: EventLog) -> tuple[Verification, str, list[tuple[str, str]]]:
    """The steps before the search: the coder's ranking of the suspects, a reproduction script (blind mode,
    when the repository's tests pass at the base commit) and the planner's plan. Returns the base
    verification (re-run with the script), the plan and the ranking ((path, function) pairs, best first)."""
    iid = bench.task.instance_id
    sources = await bench.python_sources()
    prefer: list[tuple[str, str]] = []
    if cfg.rank:
        prefer = await rank_suspects(models.coder, cfg, issue, sources, base.output, seed=cfg.seed)
        outcome.ranked = [f"{path}:{name}" for path, name in prefer]
        events.emit("repair.rank", node_id=iid, instance_id=iid, ranked=outcome.ranked)
    if bench.mode == "repo" and base.passed and cfg.reproduce and cfg.test_cmd is None:
        previous: tuple[str, str] | None = None
        for attempt in range(cfg.reproduce_attempts):
            script = await write_reproduction(models.coder, cfg, issue, sources, seed=cfg.seed + attempt,
                                              previous=previous, prefer=prefer)
            kept, output = await bench.install_repro(script) if script else (False, "no code block in the answer")
            outcome.reproduced = kept
            events.emit("repair.reproduce", node_id=iid, instance_id=iid, kept=kept, script=script,
                        output=output[-1500:])
            if kept:
                base = await bench.verify_base()
                break
            previous = (script or "", output)
    plan = ""
    if models.planner is not None:
        plan = await make_plan(models.planner, cfg, issue, sources, seed=cfg.seed, prefer=prefer)
        outcome.plan = plan
        events.emit("repair.plan", node_id=iid, instance_id=iid, plan=plan)
    return base, plan, prefer


def run_sync(coro: Any) -> Any:
    return asyncio.run(coro)
