"""Every kind of event a run writes: one model per kind, the payload typed.

Writers construct these models (`events.write(ModelCall(...))`); readers get them back from
`agentflow.events.read_events` / `parse_event` and match on the type. `AnyEvent` is the discriminated union
of all of them: a kind not listed there cannot be written.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentflow.events.base import Event

JsonDict = dict[str, Any]
"""A nested record kept as the JSON it is (usage figures, a tool's arguments, a message)."""

# ------------------------------------------------------------------------------------------- runs and nodes


class RunStart(Event):
    """A workflow run began (`thread_id`), or a batch of tasks began (`total`)."""

    kind: Literal["run.start"] = "run.start"
    workflow: str | None = None
    thread_id: str | None = None
    total: int | None = None
    """A batch: how many tasks it has."""
    todo: int | None = None
    """A batch: how many of them are left to run (the rest finished in an earlier run)."""
    resume: bool | None = None
    search: str | None = None
    executor: str | None = None


class RunResume(Event):
    kind: Literal["run.resume"] = "run.resume"
    workflow: str
    thread_id: str
    approve: bool | str
    edit: bool


class RunFork(Event):
    kind: Literal["run.fork"] = "run.fork"
    workflow: str
    thread_id: str
    forked_from: dict[str, str]
    """The thread and checkpoint forked."""
    edit: bool


class RunEnd(Event):
    """A workflow run ended (`status`), or a batch of tasks ended (`resolved`)."""

    kind: Literal["run.end"] = "run.end"
    thread_id: str | None = None
    status: str | None = None
    next: list[str] = Field(default_factory=list)
    stop_reason: str | None = None
    errors: dict[str, JsonDict] = Field(default_factory=dict)
    finished: list[str] | None = None
    """The nodes that finished."""
    usage: JsonDict | None = None
    resolved: int | None = None
    """A batch: tasks resolved."""
    statuses: dict[str, int] | None = None
    """A batch: tasks per outcome status."""


class RunBudgetExceeded(Event):
    kind: Literal["run.budget_exceeded"] = "run.budget_exceeded"
    limit_usd: float | None
    not_started: list[str]


class NodeStart(Event):
    kind: Literal["node.start"] = "node.start"
    type: str | None = None
    """The node type (typed nodes, searches)."""
    strategy: str | None = None
    """A search node's strategy."""


class NodeEnd(Event):
    kind: Literal["node.end"] = "node.end"
    writes: list[str]
    type: str | None = None
    approved: bool | None = None
    chosen: str | None = None
    """A search node: the branch it took."""
    branches: int | None = None
    value: float | None = None


class NodeFailure(Event):
    kind: Literal["node.failed"] = "node.failed"
    reason: str
    error: str | None


class WorkspaceRestored(Event):
    kind: Literal["workspace.restored"] = "workspace.restored"
    bytes: int


class LimitReached(Event):
    """A limit of the run's budget was reached."""

    kind: Literal["budget.exceeded"] = "budget.exceeded"
    limit: str
    """Which limit (`wall_seconds`, `model_calls`, ...); `kind` in the JSON line."""
    cut: list[str] | None = None
    """The nodes the run was cut before."""
    used: JsonDict | None = None

    renamed: ClassVar[dict[str, str]] = {"kind": "limit"}


# ------------------------------------------------------------------------------------------- search


class SearchNode(Event):
    """A search-tree node as it stands (the last of a node id wins); `final` in the tree's closing record."""

    kind: Literal["search.node"] = "search.node"
    strategy: str
    thread: str | None
    depth: int
    action: str | None
    value: float
    mean: float
    visits: int
    terminal: bool
    error: str | None
    snapshot_id: str | None
    diff_id: str | None
    final: bool | None = None
    chosen: bool | None = None
    select: str | None = None
    tests: Any = None
    """A branch's test result as the search report holds it (the tree's final record only)."""
    diff: str | None = None
    """A branch's workspace diff as the search report holds it (the tree's final record only)."""


class BranchMoment(StrEnum):
    START = "start"
    RESUME = "resume"
    END = "end"
    REUSED = "reused"


class SearchBranch(Event):
    kind: Literal["search.branch"] = "search.branch"
    event: BranchMoment
    parent: str | None = None
    value: float | None = None
    terminal: bool | None = None
    error: str | None = None
    setup_ms: float | None = None
    restore_ms: float | None = None


class SearchStop(Event):
    """A branch reached the search's `stop_at` (the envelope's `branch`)."""

    kind: Literal["search.stop"] = "search.stop"
    value: float
    stop_at: float


class SearchResume(Event):
    kind: Literal["search.resume"] = "search.resume"
    branches: int
    finished: int


class SearchDecision(Event):
    kind: Literal["search.decision"] = "search.decision"
    decision: str
    made: int | None = None
    widened: str | None = None


# ------------------------------------------------------------------------------------------- models and tools


class ModelCall(Event):
    kind: Literal["model.call"] = "model.call"
    spec: str
    model: str
    usage: JsonDict
    latency_s: float
    n: int
    cached: bool
    finish_reasons: list[str | None]
    messages: list[JsonDict] | None = None
    """With content capture only."""
    output: list[JsonDict] | None = None
    """With content capture only."""


class ModelTurn(Event):
    """One model call as training data: the messages read, the samples given with their token traces."""

    kind: Literal["model.turn"] = "model.turn"
    spec: str
    model: str
    identity: JsonDict
    sampling: JsonDict
    tools: list[str]
    messages: list[JsonDict]
    samples: list[JsonDict]
    cached: bool


class ModelAsk(Event):
    kind: Literal["model.ask"] = "model.ask"
    purpose: str
    tokens: int
    prompt: str | None = None
    answer: str | None = None


class ModelReplayed(Event):
    kind: Literal["model.replayed"] = "model.replayed"
    step: int


class ToolCalled(Event):
    kind: Literal["tool.call"] = "tool.call"
    name: str
    call_id: str | None
    args: JsonDict
    ok: bool
    error: str | None
    duration_s: float
    replayed: bool
    text: str
    key: str | None = None
    """The call's journal key (a replayable call)."""


class ServerMetrics(Event):
    kind: Literal["server.metrics"] = "server.metrics"
    server: str
    model: str | None
    error: str | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None
    prefix_cache_hit_rate: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    generation_tokens_per_s: float | None = None
    busy_slots_per_decode: float | None = None


# ------------------------------------------------------------------------------------------- agents


class AgentStart(Event):
    kind: Literal["agent.start"] = "agent.start"
    tools: list[str]
    text_protocol: bool


class AgentEnd(Event):
    kind: Literal["agent.end"] = "agent.end"
    stop_reason: str
    steps: int
    usage: JsonDict
    error: str | None
    error_kind: str | None
    has_output: bool


class AgentCompacted(Event):
    kind: Literal["agent.compacted"] = "agent.compacted"
    step: int
    fits: bool
    policy: list[str]
    tokens_before: int
    tokens_after: int
    window: int
    reply_tokens: int
    messages_changed: int


class AgentLoop(Event):
    kind: Literal["agent.loop"] = "agent.loop"
    loop: str
    what: str
    count: int
    action: str
    step: int


class AgentMaxTokensRaised(Event):
    kind: Literal["agent.max_tokens_raised"] = "agent.max_tokens_raised"
    max_tokens: int | None


class ApprovalRequested(Event):
    kind: Literal["approval.requested"] = "approval.requested"
    tool: str
    args: JsonDict
    call_hash: str


class ApprovalGranted(Event):
    kind: Literal["approval.granted"] = "approval.granted"
    tool: str
    args: JsonDict
    call_hash: str


class ApprovalRefused(Event):
    kind: Literal["approval.refused"] = "approval.refused"
    tool: str
    call_hash: str
    reason: str
    approved_hash: str | None = None


# ------------------------------------------------------------------------------------------- sandboxes, servers


class SandboxStart(Event):
    kind: Literal["sandbox.start"] = "sandbox.start"
    sandbox: str
    backend: str
    image: str | None = None
    workdir: str
    settings: JsonDict = Field(default_factory=dict)


class SandboxExec(Event):
    kind: Literal["sandbox.exec"] = "sandbox.exec"
    sandbox: str
    command: str
    exit_code: int
    duration_s: float
    timed_out: bool
    limit_hit: str | None
    truncated: bool


class SandboxTamper(Event):
    """A forged line on the sandbox agent's channel (dropped)."""

    kind: Literal["sandbox.tamper"] = "sandbox.tamper"
    sandbox: str
    line: str


class McpServerStart(Event):
    kind: Literal["mcp.server.start"] = "mcp.server.start"
    server: str
    target: str
    starts: int


class McpServerStop(Event):
    kind: Literal["mcp.server.stop"] = "mcp.server.stop"
    server: str
    starts: int


class McpServerExit(Event):
    kind: Literal["mcp.server.exit"] = "mcp.server.exit"
    server: str


class McpServerFailed(Event):
    kind: Literal["mcp.server.failed"] = "mcp.server.failed"
    server: str
    what: str
    reason: str


class ExecutorTask(Event):
    kind: Literal["executor.task"] = "executor.task"
    nodes: list[str]


class ExecutorRetry(Event):
    kind: Literal["executor.retry"] = "executor.retry"
    attempts: int
    nodes: list[str]


class ExecutorLost(Event):
    kind: Literal["executor.lost"] = "executor.lost"
    error: str
    attempts: int


# ------------------------------------------------------------------------------------------- reasoning steps


class ReasonConstraints(Event):
    kind: Literal["reason.constraints"] = "reason.constraints"
    constraints: list[str]


class ReasonConstraintsFallback(Event):
    kind: Literal["reason.constraints_fallback"] = "reason.constraints_fallback"
    covered: float
    answer: str


class ReasonConstraintsDropped(Event):
    kind: Literal["reason.constraints_dropped"] = "reason.constraints_dropped"
    dropped: list[str]


class ReasonSelect(Event):
    kind: Literal["reason.select"] = "reason.select"
    algorithm: str
    prior: str | None
    scores: dict[str, float | None]


class ReasonVerify(Event):
    kind: Literal["reason.verify"] = "reason.verify"
    work: str
    score: float


class ReasonReward(Event):
    kind: Literal["reason.reward"] = "reason.reward"
    algorithm: str
    reward: float
    ucb: JsonDict


class ReasonValue(Event):
    kind: Literal["reason.value"] = "reason.value"
    value: float | None
    """None: the judge gave no value."""
    assessment: str


class CodegenSimulate(Event):
    kind: Literal["codegen.simulate"] = "codegen.simulate"
    target: Literal["plan", "code"]
    verdict: str | None = None
    failure: str | None = None


class CodegenTest(Event):
    kind: Literal["codegen.test"] = "codegen.test"
    passed: int
    total: int


class CodegenReward(Event):
    kind: Literal["codegen.reward"] = "codegen.reward"
    examples: float | None
    """The share of examples passing (None: the task has none)."""
    verifier: float | None
    reward: float


class InstructCritic(Event):
    kind: Literal["instruct.critic"] = "instruct.critic"
    failed: list[str]
    by_code: int
    passed: int
    answers: list[int]


class InstructRevert(Event):
    kind: Literal["instruct.revert"] = "instruct.revert"
    passed: int
    best: int


class InstructFix(Event):
    kind: Literal["instruct.fix"] = "instruct.fix"
    ok: bool
    chars: int | None = None
    error: str | None = None


class InstructChecks(Event):
    kind: Literal["instruct.checks"] = "instruct.checks"
    by_code: int
    constraints: int


class InstructScore(Event):
    kind: Literal["instruct.score"] = "instruct.score"
    reward: float
    failed: list[str] | None


# ------------------------------------------------------------------------------------------- repair


class RepairStart(Event):
    kind: Literal["repair.start"] = "repair.start"
    search: str | None = None
    """What the workflow's searches run, in words (None: it has none)."""
    model: str | None
    workflow: str
    expected_calls: dict[str, int] | None
    step_limit: int | None
    wall_time_s: float | None


class RepairSearch(Event):
    """The task's search was switched (and why)."""

    kind: Literal["repair.search"] = "repair.search"
    search: str | None = None
    """What the workflow's searches run, in words (None: it has none)."""
    why: str
    expected_calls: dict[str, int] | None


class PreflightFindings(BaseModel):
    """What the test command does at the base commit: the payload of `repair.preflight`, and the fields of
    `agentflow.swe.preflight.Preflight` (which adds what it reads them with)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    command: str
    exit_code: int | None = None
    timed_out: bool = False
    counts: dict[str, int] = Field(default_factory=dict)
    """pytest's summary counts (passed, failed, errors, skipped, ...)."""
    fixed: list[str] = Field(default_factory=list)
    """What the harness arranged so the tests can run, without the user (the `python` shim, `src/` importable)."""
    cause: str | None = None
    """Why the tests cannot run (None: they ran)."""
    fix: str | None = None
    """What the user can do about `cause`."""
    note: str | None = None
    """Worth knowing although the tests ran (every test passes: they cannot show the bug)."""
    left_out: dict[str, str] = Field(default_factory=dict)
    """Test files left out of every run of the repair (file -> why: the optional module it imports is missing)."""
    own_errors: dict[str, str] = Field(default_factory=dict)
    """Test files whose collection fails on an error the repository's own package raises (file -> the error):
    taken as the failing behaviour, not as a set-up failure."""


class RepairPreflight(Event, PreflightFindings):
    kind: Literal["repair.preflight"] = "repair.preflight"


class RepairTestTime(Event):
    """A step's test run was shortened to fit its allowance, or ran out of time (`repair.verify.testshare`)."""

    kind: Literal["repair.test_time"] = "repair.test_time"
    step: str
    """localization, verification, confirmation (a finalist's whole-suite check), base, final."""
    action: str
    """shortened or timed_out."""
    share_s: float | None
    share: float | None = None
    """The fraction of the task's wall time `share_s` is (None: no wall limit, no share)."""
    spent_s: float
    tests: int | None = None
    """Shortened: how many tests the step ran instead."""
    suite_tests: int | None = None
    """Shortened: how many tests the whole run has (the base run's count)."""
    expected_s: float | None = None
    left_s: float | None = None
    timeout_s: float | None = None
    shortened: bool | None = None


class RepairResume(Event):
    kind: Literal["repair.resume"] = "repair.resume"
    next: list[str]


class RepairStatus(StrEnum):
    """How a task's repair ended (`agentflow.repair.outcome.InstanceOutcome.status` spells a limit after it)."""

    SUBMITTED = "submitted"
    LIMITS_EXCEEDED = "limits_exceeded"
    CONTEXT_EXCEEDED = "context_exceeded"
    ENV_ERROR = "env_error"
    NO_PATCH = "no_patch"
    INTERRUPTED = "interrupted"
    """Cut short (Ctrl-C) before it finished: a resume continues it (no outcome is written)."""


class RepairEnd(Event):
    kind: Literal["repair.end"] = "repair.end"
    status: RepairStatus
    limit: str | None = None
    """Which limit was reached (`status` limits_exceeded)."""
    finished: bool | None = None
    """False when the task was cut short (status interrupted)."""
    chosen: str | None = None
    chosen_by: str | None = None
    resolved: bool | None = None
    error: str | None = None

    @property
    def status_text(self) -> str:
        """The status as the outcome spells it (`limits_exceeded:wall_seconds`)."""
        return f"{self.status}:{self.limit}" if self.limit else str(self.status)


class RepairStopped(Event):
    """A step stopped the task: a limit of its budget was reached."""

    kind: Literal["repair.stopped"] = "repair.stopped"
    limit: str
    """Which limit (`wall_seconds`, `model_calls`, ...)."""


class RepairBase(Event):
    """What a task's search starts from: the base commit's verification, as the first edit sees it."""

    kind: Literal["repair.base"] = "repair.base"
    passed: bool | None
    score: float
    feedback: str
    """How the base was checked (the workbench's mode)."""
    reproduced: bool | None
    edit_format: str
    suspects: list[str]


class RepairSpectrum(Event):
    kind: Literal["repair.spectrum"] = "repair.spectrum"
    examples: int
    executed: int
    tests: dict[str, int] | None
    """The test run's counts (passed, failed; None: no spectrum)."""
    suspects: list[str]
    problems: list[str]


class RepairRank(Event):
    kind: Literal["repair.rank"] = "repair.rank"
    ranked: list[str]


class RepairReproduce(Event):
    kind: Literal["repair.reproduce"] = "repair.reproduce"
    kept: bool
    script: str | None
    output: str
    source: Literal["examples", "model"]


class RepairKeepCheck(Event):
    kind: Literal["repair.keep_check"] = "repair.keep_check"
    kept: bool
    script: str | None
    check: str | None
    output: str


class RepairPlan(Event):
    kind: Literal["repair.plan"] = "repair.plan"
    plan: str


class RepairExamples(Event):
    kind: Literal["repair.examples"] = "repair.examples"
    compared: int
    changed: int
    usable: bool
    behaviours: int


class RepairExamplesUnchanged(Event):
    kind: Literal["repair.examples_unchanged"] = "repair.examples_unchanged"
    shown: str


class RepairKeeps(Event):
    kind: Literal["repair.keeps"] = "repair.keeps"
    compared: int
    held: int


class RepairLocalize(Event):
    kind: Literal["repair.localize"] = "repair.localize"
    files: list[str]
    symbols: list[str]
    locations: list[str]


class RepairRegression(Event):
    kind: Literal["repair.regression"] = "repair.regression"
    passing: int
    deselected: list[str]
    test_cmd: str
    answer: str


class RepairSelectTurn(Event):
    kind: Literal["repair.select_turn"] = "repair.select_turn"
    turn: int
    ran: bool
    output: str


class RepairTestVote(Event):
    kind: Literal["repair.test_vote"] = "repair.test_vote"
    votes: dict[str, int]
    tests: int
    counted: list[Any]
    finalists: list[str]
    chosen: str
    chosen_by: str
    error: str | None


class RepairTrajectoryTurn(Event):
    kind: Literal["repair.trajectory_turn"] = "repair.trajectory_turn"
    trajectory: int
    turn: int
    edit: str
    script: bool
    feedback: str


class RepairTrajectories(Event):
    kind: Literal["repair.trajectories"] = "repair.trajectories"
    runs: list[JsonDict]


class RepairToolEdit(Event):
    kind: Literal["repair.tool_edit"] = "repair.tool_edit"
    sample: int
    steps: int
    stop_reason: str
    files: list[str]


class RepairResample(Event):
    kind: Literal["repair.resample"] = "repair.resample"
    status: str
    errors: list[str]


class RepairAttempt(Event):
    kind: Literal["repair.attempt"] = "repair.attempt"
    value: float
    passed: bool | None
    dropped_test_files: list[str]
    duration_s: float
    part_of: str | None


class RepairValue(Event):
    kind: Literal["repair.value"] = "repair.value"
    value: float | None
    search_value: float
    assessment: str


class RepairCandidate(Event):
    kind: Literal["repair.candidate"] = "repair.candidate"
    candidate_id: str
    status: str
    passed: bool | None
    score: float | None
    reason: str
    part_of: str | None


class RepairConfirm(Event):
    """The chosen candidate's targeted tests confirmed on the whole suite (or not: `held`)."""

    kind: Literal["repair.confirm"] = "repair.confirm"
    candidate_id: str
    targeted: Any
    held: bool
    estimated: list[Any]
    whole: list[Any]
    seconds: float | None


class RepairVote(Event):
    kind: Literal["repair.vote"] = "repair.vote"
    by: str
    clusters: int
    patch_vote_choice: str


class RepairNoop(Event):
    kind: Literal["repair.noop"] = "repair.noop"
    left_out: int
    among: int


class RepairDiscriminate(Event):
    kind: Literal["repair.discriminate"] = "repair.discriminate"
    finalists: list[str]
    chosen: str
    chosen_by: str
    arguments: list[str]
    error: str | None


class RepairChoice(Event):
    kind: Literal["repair.choice"] = "repair.choice"
    candidate_id: str
    chosen_by: str | None
    among: int | None
    reason: str
    noop: bool


AnyEvent = Annotated[
    RunStart | RunResume | RunFork | RunEnd | RunBudgetExceeded | NodeStart | NodeEnd | NodeFailure
    | WorkspaceRestored | LimitReached
    | SearchNode | SearchBranch | SearchStop | SearchResume | SearchDecision
    | ModelCall | ModelTurn | ModelAsk | ModelReplayed | ToolCalled | ServerMetrics
    | AgentStart | AgentEnd | AgentCompacted | AgentLoop | AgentMaxTokensRaised
    | ApprovalRequested | ApprovalGranted | ApprovalRefused
    | SandboxStart | SandboxExec | SandboxTamper
    | McpServerStart | McpServerStop | McpServerExit | McpServerFailed
    | ExecutorTask | ExecutorRetry | ExecutorLost
    | ReasonConstraints | ReasonConstraintsFallback | ReasonConstraintsDropped | ReasonSelect | ReasonVerify
    | ReasonReward | ReasonValue
    | CodegenSimulate | CodegenTest | CodegenReward
    | InstructCritic | InstructRevert | InstructFix | InstructChecks | InstructScore
    | RepairStart | RepairSearch | RepairPreflight | RepairTestTime | RepairResume | RepairEnd | RepairStopped
    | RepairBase
    | RepairSpectrum | RepairRank | RepairReproduce | RepairKeepCheck | RepairPlan | RepairExamples
    | RepairExamplesUnchanged | RepairKeeps | RepairLocalize | RepairRegression | RepairSelectTurn
    | RepairTestVote | RepairTrajectoryTurn | RepairTrajectories | RepairToolEdit | RepairResample
    | RepairAttempt | RepairValue | RepairCandidate | RepairConfirm | RepairVote | RepairNoop
    | RepairDiscriminate | RepairChoice,
    Field(discriminator="kind"),
]
"""Every event a run writes, told apart by `kind`."""
