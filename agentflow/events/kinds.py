"""Every kind of event a run writes: one model per kind, the payload typed.

Writers construct these models (`events.write(ModelCall(...))`); readers get them back from
`agentflow.events.read_events` / `parse_event` and match on the type. `AnyEvent` is the discriminated union
of all of them: a kind not listed there cannot be written.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentflow.budget import BudgetKind
from agentflow.events.base import Event

JsonDict = dict[str, Any]
"""A nested record kept as the JSON it is (usage figures, a tool's arguments, a message)."""

# ------------------------------------------------------------------------------------------- runs and nodes


class RunStart(Event, kind="run.start"):
    """A workflow run began (`thread_id`), or a batch of tasks began (`total`)."""

    workflow: str | None = None
    thread_id: str | None = None
    total: int | None = None
    """A batch: how many tasks it has."""
    todo: int | None = None
    """A batch: how many of them are left to run (the rest finished in an earlier run)."""
    resume: bool | None = None
    search: str | None = None
    executor: str | None = None


class RunResume(Event, kind="run.resume"):
    workflow: str
    thread_id: str
    approve: bool | str
    edit: bool


class RunFork(Event, kind="run.fork"):
    workflow: str
    thread_id: str
    forked_from: dict[str, str]
    """The thread and checkpoint forked."""
    edit: bool


class RunEnd(Event, kind="run.end"):
    """A workflow run ended (`status`), or a batch of tasks ended (`resolved`)."""

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
    """A batch: tasks per outcome status (a `RepairStatus`)."""
    limits: dict[str, int] | None = None
    """A batch: tasks per limit reached (a `BudgetKind`; status limits_exceeded)."""


class RunBudgetExceeded(Event, kind="run.budget_exceeded"):
    limit_usd: float | None
    not_started: list[str]


class NodeStart(Event, kind="node.start"):
    type: str | None = None
    """The node type (typed nodes, searches)."""
    strategy: str | None = None
    """A search node's strategy."""


class NodeEnd(Event, kind="node.end"):
    writes: list[str]
    type: str | None = None
    approved: bool | None = None
    chosen: str | None = None
    """A search node: the branch it took."""
    branches: int | None = None
    value: float | None = None


class NodeFailure(Event, kind="node.failed"):
    reason: str
    error: str | None


class WorkspaceRestored(Event, kind="workspace.restored"):
    bytes: int


class LimitReached(Event, kind="budget.exceeded"):
    """A limit of the run's budget was reached."""

    limit: str
    """Which limit (`wall_seconds`, `model_calls`, ...); `kind` in the JSON line."""
    cut: list[str] | None = None
    """The nodes the run was cut before."""
    used: JsonDict | None = None

    renamed: ClassVar[dict[str, str]] = {"kind": "limit"}


# ------------------------------------------------------------------------------------------- search


class SearchNode(Event, kind="search.node"):
    """A search-tree node as it stands (the last of a node id wins); `final` in the tree's closing record."""

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


class SearchBranch(Event, kind="search.branch"):
    event: BranchMoment
    parent: str | None = None
    value: float | None = None
    terminal: bool | None = None
    error: str | None = None
    setup_ms: float | None = None
    restore_ms: float | None = None


class SearchStop(Event, kind="search.stop"):
    """A branch reached the search's `stop_at` (the envelope's `branch`)."""

    value: float
    stop_at: float


class SearchResume(Event, kind="search.resume"):
    branches: int
    finished: int


class SearchDecision(Event, kind="search.decision"):
    decision: str
    made: int | None = None
    widened: str | None = None


# ------------------------------------------------------------------------------------------- models and tools


class ModelCall(Event, kind="model.call"):
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


class ModelTurn(Event, kind="model.turn"):
    """One model call as training data: the messages read, the samples given with their token traces."""

    spec: str
    model: str
    identity: JsonDict
    sampling: JsonDict
    tools: list[str]
    messages: list[JsonDict]
    samples: list[JsonDict]
    cached: bool


class ModelAsk(Event, kind="model.ask"):
    purpose: str
    tokens: int
    prompt: str | None = None
    answer: str | None = None


class ModelReplayed(Event, kind="model.replayed"):
    step: int


class ToolCalled(Event, kind="tool.call"):
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


class ServerMetrics(Event, kind="server.metrics"):
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


class AgentStart(Event, kind="agent.start"):
    tools: list[str]
    text_protocol: bool


class AgentEnd(Event, kind="agent.end"):
    stop_reason: str
    steps: int
    usage: JsonDict
    error: str | None
    error_kind: str | None
    has_output: bool


class AgentCompacted(Event, kind="agent.compacted"):
    step: int
    fits: bool
    policy: list[str]
    tokens_before: int
    tokens_after: int
    window: int
    reply_tokens: int
    messages_changed: int


class AgentLoop(Event, kind="agent.loop"):
    loop: str
    what: str
    count: int
    action: str
    step: int


class AgentMaxTokensRaised(Event, kind="agent.max_tokens_raised"):
    max_tokens: int | None


class ApprovalRequested(Event, kind="approval.requested"):
    tool: str
    args: JsonDict
    call_hash: str


class ApprovalGranted(Event, kind="approval.granted"):
    tool: str
    args: JsonDict
    call_hash: str


class ApprovalRefused(Event, kind="approval.refused"):
    tool: str
    call_hash: str
    reason: str
    approved_hash: str | None = None


# ------------------------------------------------------------------------------------------- sandboxes, servers


class SandboxStart(Event, kind="sandbox.start"):
    sandbox: str
    backend: str
    image: str | None = None
    workdir: str
    settings: JsonDict = Field(default_factory=dict)


class SandboxExec(Event, kind="sandbox.exec"):
    sandbox: str
    command: str
    exit_code: int
    duration_s: float
    timed_out: bool
    limit_hit: str | None
    truncated: bool


class SandboxTamper(Event, kind="sandbox.tamper"):
    """A forged line on the sandbox agent's channel (dropped)."""

    sandbox: str
    line: str


class McpServerStart(Event, kind="mcp.server.start"):
    server: str
    target: str
    starts: int


class McpServerStop(Event, kind="mcp.server.stop"):
    server: str
    starts: int


class McpServerExit(Event, kind="mcp.server.exit"):
    server: str


class McpServerFailed(Event, kind="mcp.server.failed"):
    server: str
    what: str
    reason: str


class ExecutorTask(Event, kind="executor.task"):
    nodes: list[str]


class ExecutorRetry(Event, kind="executor.retry"):
    attempts: int
    nodes: list[str]


class ExecutorLost(Event, kind="executor.lost"):
    error: str
    attempts: int


# ------------------------------------------------------------------------------------------- reasoning steps


class ReasonConstraints(Event, kind="reason.constraints"):
    constraints: list[str]


class ReasonConstraintsFallback(Event, kind="reason.constraints_fallback"):
    covered: float
    answer: str


class ReasonConstraintsDropped(Event, kind="reason.constraints_dropped"):
    dropped: list[str]


class ReasonSelect(Event, kind="reason.select"):
    algorithm: str
    prior: str | None
    scores: dict[str, float | None]


class ReasonVerify(Event, kind="reason.verify"):
    work: str
    score: float


class ReasonReward(Event, kind="reason.reward"):
    algorithm: str
    reward: float
    ucb: JsonDict


class ReasonValue(Event, kind="reason.value"):
    value: float | None
    """None: the judge gave no value."""
    assessment: str


class CodegenSimulate(Event, kind="codegen.simulate"):
    target: Literal["plan", "code"]
    verdict: str | None = None
    failure: str | None = None


class CodegenTest(Event, kind="codegen.test"):
    passed: int
    total: int


class CodegenReward(Event, kind="codegen.reward"):
    examples: float | None
    """The share of examples passing (None: the task has none)."""
    verifier: float | None
    reward: float


class InstructCritic(Event, kind="instruct.critic"):
    failed: list[str]
    by_code: int
    passed: int
    answers: list[int]


class InstructRevert(Event, kind="instruct.revert"):
    passed: int
    best: int


class InstructFix(Event, kind="instruct.fix"):
    ok: bool
    chars: int | None = None
    error: str | None = None


class InstructChecks(Event, kind="instruct.checks"):
    by_code: int
    constraints: int


class InstructScore(Event, kind="instruct.score"):
    reward: float
    failed: list[str] | None


# ------------------------------------------------------------------------------------------- repair


class RepairStart(Event, kind="repair.start"):
    search: str | None = None
    """What the workflow's searches run, in words (None: it has none)."""
    model: str | None
    workflow: str
    expected_calls: dict[str, int] | None
    step_limit: int | None
    wall_time_s: float | None


class RepairSearch(Event, kind="repair.search"):
    """The task's search was switched (and why)."""

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
    seconds: float | None = None
    """How long the test command ran (its runs together, when files were left out)."""
    stop_after_s: float | None = None
    """When the run was given a time at which no further test starts (the whole suite would not fit its
    allowance: `agentflow.repair.verify.testshare`); None: the command ran to its end or its timeout."""
    ran_tests: int | None = None
    """Set when the run stopped at `stop_after_s`: how many tests ran, of `suite_tests` collected."""
    suite_tests: int | None = None
    first: list[str] = Field(default_factory=list)
    """The test files run first (the tests the issue names, those nearest the modules it names), the others
    after them in the suite's order."""


class RepairPreflight(Event, PreflightFindings, kind="repair.preflight"):
    """The test command at the base commit, as the pre-flight found it (`PreflightFindings`)."""


class RepairTestTime(Event, kind="repair.test_time"):
    """A step's test run was shortened to fit its allowance, or ran out of time (`repair.verify.testshare`)."""

    step: str
    """preflight, localization, line spectrum, verification, confirmation (a finalist's whole-suite check),
    reproduction (a failing-test report's tests), base, final."""
    action: str
    """shortened, skipped (the step's run left out: not even its shortest useful part fits) or timed_out."""
    share_s: float | None
    share: float | None = None
    """The fraction of the task's (expected) wall time `share_s` is (None: no share)."""
    expected_wall_s: float | None = None
    """The task's expected wall time the share was planned against at this step (`testshare.WallPlan`): the
    seconds so far plus the model calls left times the seconds per call, at most the wall limit (without a
    model-call limit: the wall limit); None: not planned (no limit of either)."""
    spent_s: float
    tests: int | None = None
    """Shortened: how many tests the step ran instead."""
    suite_tests: int | None = None
    """Shortened: how many tests the whole run has (the base run's count)."""
    expected_s: float | None = None
    left_s: float | None = None
    timeout_s: float | None = None
    shortened: bool | None = None


class RepairResume(Event, kind="repair.resume"):
    next: list[str]


class RepairStatus(StrEnum):
    """How a task's repair ended (`agentflow.repair.outcome.InstanceOutcome.status`; with limits_exceeded,
    its `limit` says which limit)."""

    SUBMITTED = "submitted"
    LIMITS_EXCEEDED = "limits_exceeded"
    CONTEXT_EXCEEDED = "context_exceeded"
    ENV_ERROR = "env_error"
    NO_PATCH = "no_patch"
    INTERRUPTED = "interrupted"
    """Cut short (Ctrl-C) before it finished: a resume continues it (no outcome is written)."""


class RepairEnd(Event, kind="repair.end"):
    status: RepairStatus
    limit: BudgetKind | None = None
    """Which limit was reached (`status` limits_exceeded)."""
    finished: bool | None = None
    """False when the task was cut short (status interrupted)."""
    chosen: str | None = None
    chosen_by: str | None = None
    resolved: bool | None = None
    error: str | None = None

    @property
    def status_text(self) -> str:
        """The status as a line of progress shows it (`limits_exceeded:wall_seconds`)."""
        return f"{self.status}:{self.limit}" if self.limit else str(self.status)


class RepairStopped(Event, kind="repair.stopped"):
    """A step stopped the task: a limit of its budget was reached."""

    limit: BudgetKind
    """Which limit (`wall_seconds`, `model_calls`, ...)."""


class RepairBase(Event, kind="repair.base"):
    """What a task's search starts from: the base commit's verification, as the first edit sees it."""

    passed: bool | None
    score: float
    feedback: str
    """How the base was checked (the workbench's mode)."""
    reproduced: bool | None
    edit_format: str
    suspects: list[str]


class RepairSpectrum(Event, kind="repair.spectrum"):
    examples: int
    executed: int
    tests: dict[str, int] | None
    """The test run's counts (passed, failed; None: no spectrum)."""
    suspects: list[str]
    problems: list[str]
    marked: list[str] = Field(default_factory=list)
    """`path:line` of the lines the line spectrum marks (`line_marks`; most suspect first)."""
    line_problems: list[str] = Field(default_factory=list)
    """What gave the line spectrum no evidence, and why."""


class RepairRank(Event, kind="repair.rank"):
    ranked: list[str]


MutantsStop = Literal["passed", "all", "limit", "seconds"]
"""What ended a `swe.mutants` step: passed, a change passed; all, every change was tried; limit, `mutants_limit`
were; seconds, its `mutants_seconds` were spent."""


class RepairMutants(Event, kind="repair.mutants"):
    """What `swe.mutants` did: which functions' single-site changes it verified, and why it stopped."""

    functions: list[str]
    """`path:function` of the suspect functions whose changes were tried, best first."""
    changes: int
    """Their changes (at most `mutants_limit` of them are tried)."""
    tried: int
    seconds: float
    passed: str | None
    """The candidate id of the change that passed, None if none did."""
    stopped: MutantsStop


class RepairReproduce(Event, kind="repair.reproduce"):
    kept: bool
    script: str | None
    output: str
    source: Literal["examples", "model", "tests"]
    """examples: a script of the issue's examples; model: a script the model wrote; tests: the failing tests a
    failing-test report names (`tests`), run by id."""
    tests: list[str] = Field(default_factory=list)


class RepairKeepCheck(Event, kind="repair.keep_check"):
    kept: bool
    script: str | None
    check: str | None
    output: str


class RepairPlan(Event, kind="repair.plan"):
    plan: str


class RepairExamples(Event, kind="repair.examples"):
    compared: int
    changed: int
    usable: bool
    behaviours: int


class RepairKeeps(Event, kind="repair.keeps"):
    compared: int
    held: int


class RepairLocalize(Event, kind="repair.localize"):
    files: list[str]
    symbols: list[str]
    locations: list[str]


class RepairRegression(Event, kind="repair.regression"):
    passing: int
    deselected: list[str]
    test_cmd: str
    answer: str


class RepairSelectTurn(Event, kind="repair.select_turn"):
    turn: int
    ran: bool
    output: str


class RepairTestVote(Event, kind="repair.test_vote"):
    votes: dict[str, int]
    tests: int
    counted: list[Any]
    finalists: list[str]
    chosen: str
    chosen_by: str
    error: str | None


class RepairTrajectoryTurn(Event, kind="repair.trajectory_turn"):
    trajectory: int
    turn: int
    edit: str
    script: bool
    feedback: str


class RepairTrajectories(Event, kind="repair.trajectories"):
    runs: list[JsonDict]


class RepairToolEdit(Event, kind="repair.tool_edit"):
    sample: int
    steps: int
    stop_reason: str
    files: list[str]


class RepairResample(Event, kind="repair.resample"):
    status: str
    errors: list[str]


class RepairAttempt(Event, kind="repair.attempt"):
    value: float
    passed: bool | None
    dropped_test_files: list[str]
    duration_s: float
    part_of: str | None


class RepairValue(Event, kind="repair.value"):
    value: float | None
    search_value: float
    assessment: str


class RepairCandidate(Event, kind="repair.candidate"):
    candidate_id: str
    status: str
    passed: bool | None
    score: float | None
    reason: str
    part_of: str | None


class RepairConfirm(Event, kind="repair.confirm"):
    """The chosen candidate's targeted tests confirmed on the whole suite (or not: `held`)."""

    candidate_id: str
    targeted: Any
    held: bool
    estimated: list[Any]
    whole: list[Any]
    seconds: float | None


class RepairVote(Event, kind="repair.vote"):
    by: str
    clusters: int
    patch_vote_choice: str


class RepairNoop(Event, kind="repair.noop"):
    left_out: int
    among: int


class RepairDiscriminate(Event, kind="repair.discriminate"):
    finalists: list[str]
    chosen: str
    chosen_by: str
    arguments: list[str]
    error: str | None


class RepairChoice(Event, kind="repair.choice"):
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
    | RepairSpectrum | RepairRank | RepairMutants | RepairReproduce | RepairKeepCheck | RepairPlan | RepairExamples
    | RepairKeeps | RepairLocalize | RepairRegression | RepairSelectTurn
    | RepairTestVote | RepairTrajectoryTurn | RepairTrajectories | RepairToolEdit | RepairResample
    | RepairAttempt | RepairValue | RepairCandidate | RepairConfirm | RepairVote | RepairNoop
    | RepairDiscriminate | RepairChoice,
    Field(discriminator="kind"),
]
"""Every event a run writes, told apart by `kind`."""
