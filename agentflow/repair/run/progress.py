"""What a repair is doing, said while it runs: `ProgressPrinter`, an `EventSink` on a run's `EventLog`, makes a
line per model call, candidate, decision, step and task, each with the time since the run started and, where it
can, an estimate of the time left. `agentflow repair` and `agentflow bench` print them on stderr (`--quiet`:
none); a Python caller adds the printer to its own log (`events.sinks.append(ProgressPrinter())`) or passes it to
`run_batch(sinks=[...])`.

A task's estimate: its mean seconds per model call so far times the calls still expected (`expected_calls`,
written in `repair.start`; a node that ended expects none more), capped by its `step_limit` and `wall_time_s`.
A bench's line estimates from its finished tasks (`Progress.eta_s`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentflow.events import Event
from agentflow.events.kinds import (
    ModelCall,
    NodeEnd,
    NodeStart,
    RepairCandidate,
    RepairChoice,
    RepairConfirm,
    RepairEnd,
    RepairMutants,
    RepairNoop,
    RepairPreflight,
    RepairReproduce,
    RepairSearch,
    RepairStart,
    RepairStatus,
    RepairTestTime,
    RunStart,
)

if TYPE_CHECKING:
    from agentflow.graph.compile.nodetypes import NodeTypeRegistry
    from agentflow.graph.define.spec import NodeSpec, WorkflowSpec
    from agentflow.repair.config import RepairConfig
    from agentflow.repair.outcome import Candidate, InstanceOutcome
    from agentflow.repair.verify.workbench import Verification

__all__ = ["Progress", "ProgressPrinter", "RunCounts", "candidate_reason", "counts_text", "expected_calls", "format_duration", "verdict"]


# ------------------------------------------------------------------------------------------ a run's counts


@dataclass(frozen=True)
class RunCounts:
    """How a run's finished tasks stand, as report.json counts them (`RunCounts.of` its summary): the one
    source of the numbers of bench's progress line, its last line and the report."""

    done: int = 0
    """Tasks with an outcome (report.json: total_instances minus the incomplete ones)."""
    submitted: int = 0
    """Tasks that handed in a patch, resolved or not (completed_instances + error_instances)."""
    resolved: int = 0
    """Tasks whose patch the grading resolved (resolved_instances)."""
    failed: int = 0
    """Tasks that ended without a patch: no candidate, a limit before any, env_error (empty_patch_instances)."""
    cost_usd: float = 0.0

    @classmethod
    def of(cls, summary: Mapping[str, Any]) -> RunCounts:
        return cls(
            done=int(summary["total_instances"]) - len(summary["incomplete_ids"]),
            submitted=int(summary["completed_instances"]) + int(summary["error_instances"]),
            resolved=int(summary["resolved_instances"]),
            failed=int(summary["empty_patch_instances"]),
            cost_usd=float(summary.get("cost_usd") or 0.0),
        )


@dataclass
class Progress:
    """A run's progress, handed to `on_progress` before the first task and after each one."""

    total: int
    todo: int = 0
    """Tasks this process repairs (the others were finished before a `--resume`)."""
    workers: int = 1
    counts: RunCounts = field(default_factory=RunCounts)
    """The counts of report.json as last written."""
    durations: list[float] = field(default_factory=list)
    """Wall seconds of each task finished in this process: the basis of the estimate."""

    def eta_s(self) -> float | None:
        """Seconds until the last task is done: the mean duration of the tasks finished in this process times the
        tasks left, over the workers (None before the first one finished)."""
        if not self.durations:
            return None
        left = max(0, self.todo - len(self.durations))
        parallel = max(1, min(self.workers, left))
        return sum(self.durations) / len(self.durations) * left / parallel


# ----------------------------------------------------------------------------------------------- what to expect


def expected_calls(cfg: RepairConfig, spec: WorkflowSpec, registry: NodeTypeRegistry) -> dict[str, int]:
    """Model calls each top-level node of the repair workflow `spec` is expected to make in a run of `cfg`, as
    each node type states (`NodeType.calls`): the basis of a task's time estimate, not a limit."""
    return {name: _graph_search_calls(cfg, node, registry) if node.search is not None else
            _node_calls(cfg, node, registry) for name, node in spec.nodes.items()}


def _node_calls(cfg: RepairConfig, node: NodeSpec, registry: NodeTypeRegistry) -> int:
    node_type = registry.get(node.type) if node.type else None
    return node_type.expected_calls(node.settings, cfg) if node_type is not None else 0


def _graph_search_calls(cfg: RepairConfig, node: NodeSpec, registry: NodeTypeRegistry) -> int:
    """Model calls of a graph search node: attempts (best_of_n: `n` chains of `max_attempts`; mcts: `n`; the
    stepwise strategies: a step per depth of `n`, x `expand` for beam) times the calls of its subgraph's nodes."""
    from agentflow.graph.search.settings import SearchSettings  # the search's defaults, from their one source

    search = SearchSettings.model_validate(dict(node.search))
    steps = node.subgraph.nodes.values()
    chain = next((int(s.settings.get("max_attempts", cfg.search.max_attempts)) for s in steps if s.type == "swe.test"),
                 1)  # without a test node a branch runs its subgraph once (codemonkeys' trajectories)
    per_attempt = sum(_node_calls(cfg, s, registry) for s in steps)
    n, depth = search.n, min(chain, search.max_depth)
    attempts = {"best_of_n": n * chain, "mcts": n, "rebase": n * depth}.get(
        search.strategy, n * search.expand_at(0) * depth)
    return attempts * per_attempt


# ----------------------------------------------------------------------------------------------- why, in words


def _names(ids: list[str], limit: int = 3) -> str:
    shown = ", ".join(t.rsplit("::", 1)[-1] for t in ids[:limit])
    return shown + (f", and {len(ids) - limit} more" if len(ids) > limit else "")


_FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def verdict(v: Verification | None) -> str:
    """What a candidate's verification says, in a few words (`tests fail (2 of 5: test_x, test_y)`; `not refuted:
    ...` in blind mode, where passing tests prove no fix), with which tests ran when not all did."""
    said = _verdict(v)
    if v is not None and v.targeted:
        said += (f" [ran {v.targeted} tests, the failing ones first: the run's time allowance]" if v.shortened
                 else f" [ran the {v.targeted} tests that reach the change]")
    return said


def _verdict(v: Verification | None) -> str:
    if v is None or v.kind == "none":
        return "not verified"
    if v.kind == "task_tests" and v.tests_status:
        ids = [t for part in v.tests_status.values() for t in part.get("failure", [])]
        total = sum(len(t) for part in v.tests_status.values() for t in part.values())
        if not ids:
            return f"tests pass ({total} of {total})"
        return f"tests fail ({len(ids)} of {total}: {_names(ids)})"
    said: list[str] = []
    if v.exit_code != 0:
        failed = list(dict.fromkeys(_FAILED_LINE.findall(v.output)))
        counts = v.counts
        of = f" of {counts[1]}" if counts and counts[1] else ""
        if failed:
            said.append(f"tests fail ({len(failed)}{of}: {_names(failed)})")
        elif counts and counts[1] > counts[0]:
            said.append(f"tests fail ({counts[1] - counts[0]}{of})")
        else:
            said.append(f"the tests did not run to the end (exit {v.exit_code})")
    if v.reproduced:
        said.append("the issue still reproduces")
    if said:
        return "; ".join(said)
    if v.passed is True:
        return "tests pass"
    if v.reproduced is False:
        return "not refuted: the tests pass and the reproduction no longer fails"
    return "not refuted: the tests pass (as they did before the change)"


_STATUS_WORDS = {"noop": "noop", "unparsable": "the answer could not be read",
                 "apply_error": "the edit does not apply"}


def candidate_reason(cand: Candidate) -> str:
    """A candidates.jsonl row's outcome in a few words (why it failed, when it did)."""
    if cand.status == "ok":
        return verdict(cand.verification)
    why = _STATUS_WORDS.get(cand.status, cand.status)
    return f"{why} ({cand.edit_errors[0][:160]})" if cand.edit_errors else why


_CHOSEN_BY = {
    "only": "the only candidate with a patch",
    "tests": "the best test result",
    "keep_check": "it still passes the keep-working check, the others do not",
    "examples": "it changes what the issue's examples show",
    "behaviour_vote": "most samples make the issue's examples show what it makes them show",
    "vote": "most samples agree on its patch",
    "verifier": "the verifier model judged it best",
    "value": "the best value among the finalists",
    "test_vote": "it passes the most generated tests",
    "selector": "the selection trajectory picked it",
    "best_so_far": "the best verified so far when a limit stopped the task",
}


def format_duration(seconds: float | None) -> str:
    """`42s`, `3m05s`, `1h02m`; `?` for None."""
    if seconds is None:
        return "?"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _clock(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


def counts_text(counts: RunCounts, total: int) -> str:
    """`3/10 done: submitted 2 (resolved 1), failed 1` — the counts of report.json (`RunCounts`)."""
    return (f"{counts.done}/{total} done: submitted {counts.submitted} (resolved {counts.resolved}), "
            f"failed {counts.failed}")


# ----------------------------------------------------------------------------------------------- the printer


def _stderr_line(line: str) -> None:
    # looked up at each line: a live progress bar (bench on a terminal) swaps sys.stderr for its own proxy
    stream = sys.stderr
    stream.write(line + "\n")
    stream.flush()


@dataclass
class _Task:
    """What the printer knows of one task."""

    started: float
    plan: dict[str, int]
    step_limit: int | None
    wall_time_s: float | None
    model: str
    node: str | None = None
    ended: set[str] = field(default_factory=set)
    calls: int = 0
    node_calls: int = 0
    tokens: int = 0
    cannot_run: bool = False
    """The pre-flight found that the tests cannot run."""

    def calls_expected(self) -> int:
        """The plan's calls, at most the step limit."""
        total = sum(self.plan.values())
        return min(total, self.step_limit) if self.step_limit is not None else total

    def calls_left(self) -> int:
        left = sum(calls for name, calls in self.plan.items() if name not in self.ended and name != self.node)
        if self.node is not None:
            expected = self.plan.get(self.node, 0)
            # a node past its expected calls (answers drawn again) makes one more, as far as anyone can tell
            left += max(expected - self.node_calls, 0) or int(bool(expected) and not left)
        if self.step_limit is not None:
            left = min(left, max(0, self.step_limit - self.calls))
        return left

    def eta_s(self, now: float) -> float | None:
        if self.calls == 0:
            return None
        elapsed = now - self.started
        eta = elapsed / self.calls * self.calls_left()
        if self.wall_time_s is not None:
            eta = min(eta, max(0.0, self.wall_time_s - elapsed))
        return eta


class ProgressPrinter:
    """An `EventSink` that says what a repair is doing (see the module docstring). `write` takes one line
    (default: stderr, flushed); lines name their task when the run has more than one. Never raises: a line it
    cannot make is left out rather than stopping the repair that emitted the event."""

    def __init__(self, write: Callable[[str], None] | None = None) -> None:
        self.write = write or _stderr_line
        self.tasks: dict[str, _Task] = {}
        self.t0: float | None = None
        self.many = False
        """The run repairs more than one task: each line starts with its task's id."""
        self.pending: dict[str, tuple[float, str]] = {}
        """A task's first line (what it runs), said with its next one: a repair stopped by its pre-flight says
        only why (one line, the error's), not what it was about to do."""

    # -------------------------------------------------------------------------------- the sink

    def __call__(self, event: Event) -> None:
        try:
            if self.t0 is None:
                self.t0 = event.ts
            said = self._said(event)
            if said:
                iid, text = said
                header = self.pending.pop(iid, None) if iid else None
                if header is not None:
                    self._line(iid, *header)
                self._line(iid, event.ts, text)
        except Exception:  # noqa: BLE001 - a progress line is never worth a failed repair
            return

    def _line(self, iid: str | None, ts: float, text: str) -> None:
        who = f"{iid}: " if self.many and iid else ""
        self.write(f"[{_clock(ts - (self.t0 or ts))}] {who}{text}")

    def batch(self, progress: Progress, outcome: InstanceOutcome | None, *, now: float | None = None) -> None:
        """A bench's line after each finished task: the report's counts, the cost, an estimate, the task's status."""
        import time

        now = time.time() if now is None else now
        if self.t0 is None:
            self.t0 = now
        self.write(f"[{_clock(now - self.t0)}] {self.batch_text(progress, outcome)}")

    @staticmethod
    def batch_text(progress: Progress, outcome: InstanceOutcome | None = None) -> str:
        text = (f"{counts_text(progress.counts, progress.total)}, cost ${progress.counts.cost_usd:.4f}; "
                f"ETA {format_duration(progress.eta_s())}")
        if outcome is not None:
            resolved = (outcome.report or {}).get("resolved")
            text += f"; {outcome.instance_id}: {outcome.status}" + (" (resolved)" if resolved else "")
        return text

    # -------------------------------------------------------------------------------- the lines

    def _said(self, event: Event) -> tuple[str | None, str] | None:
        """The line `event` makes, and its task (None: the event makes no line)."""
        said = _LINES.get(type(event))
        iid, task = self._task_of(event)
        text = said(self, event, iid, task) if said is not None else None
        return (iid, text) if text else None

    def _task_of(self, event: Event) -> tuple[str | None, _Task | None]:
        iid = event.instance_id
        if not iid and event.node_id:
            head = event.node_id.split("/", 1)[0]
            iid = head if head in self.tasks else None
        if not iid and len(self.tasks) == 1:  # an agent's own calls (named after the agent) in a one-task run
            iid = next(iter(self.tasks))
        return iid, self.tasks.get(iid) if iid else None

    @staticmethod
    def _eta(task: _Task | None, ts: float) -> str:
        return f"; ETA {format_duration(task.eta_s(ts))}" if task is not None else ""

    def _test_time(self, e: RepairTestTime, iid: str | None, task: _Task | None) -> str:
        from agentflow.repair.verify.testshare import describe

        return describe(e.data)

    def _run_start(self, e: RunStart, iid: str | None, task: _Task | None) -> str | None:
        if e.total is None:  # a task's own workflow run (the graph engine's run.start)
            return None
        total, todo = e.total, e.total if e.todo is None else e.todo
        self.many = total > 1
        if not self.many:
            return None
        done = f", {total - todo} done before" if todo < total else ""
        return f"run: {todo} of {total} tasks to repair{done} ({f'search {e.search}' if e.search else 'no search'})"

    def _repair_start(self, e: RepairStart, iid: str | None, task: _Task | None) -> None:
        iid = str(e.instance_id or e.node_id)
        model = str(e.model or "").replace("{instance_id}", iid)
        task = self.tasks[iid] = _Task(started=e.ts, plan=dict(e.expected_calls or {}), step_limit=e.step_limit,
                                       wall_time_s=e.wall_time_s, model=model)
        search = f"search {e.search}" if e.search else "no search"
        text = (f"repair{'' if self.many else ' ' + iid}: workflow {e.workflow} ({search}), model {task.model}; "
                f"about {task.calls_expected()} model calls expected")
        self.pending[iid] = (e.ts, text)

    def _preflight(self, e: RepairPreflight, iid: str | None, task: _Task | None) -> str | None:
        from agentflow.swe.preflight import Preflight

        found = Preflight.model_validate({k: v for k, v in e.data.items() if k in Preflight.model_fields})
        if not found.can_run:  # the repair stops with an error that says so (a bench's task: its end line)
            if task is not None:
                task.cannot_run = True
            return None
        return f"pre-flight: {found.summary()}"

    def _search(self, e: RepairSearch, iid: str | None, task: _Task | None) -> str:
        expected = ""
        if task is not None and e.expected_calls:
            task.plan = dict(e.expected_calls)
            expected = f"; about {task.calls_expected()} model calls expected"
        return f"decision: search {e.search}, because {e.why}{expected}"

    def _node_start(self, e: NodeStart, iid: str | None, task: _Task | None) -> str | None:
        name = (e.node_id or "").split("/", 1)[-1]
        if task is None or name not in task.plan:
            return None
        task.node, task.node_calls = name, 0
        expected = task.plan[name]
        calls = f", about {expected} model call{'s' if expected != 1 else ''}" if expected else ""
        return f"step {name} ({e.type or 'node'}{calls})"

    def _node_end(self, e: NodeEnd, iid: str | None, task: _Task | None) -> None:
        name = (e.node_id or "").split("/", 1)[-1]
        if task is not None and name in task.plan:
            task.ended.add(name)
            if task.node == name:
                task.node = None

    def _model_call(self, e: ModelCall, iid: str | None, task: _Task | None) -> str:
        tokens_in, tokens_out = int(e.usage.get("input_tokens") or 0), int(e.usage.get("output_tokens") or 0)
        node = e.node_id or ""
        if iid and node.startswith(f"{iid}/"):
            label = f"edit {node.split('/', 1)[1]}"  # a search sample: its candidate's id
        elif iid and node == iid:
            label = task.node if task is not None and task.node else "repair"
        else:
            label = node or "model"
        if task is not None:
            task.calls += 1
            task.node_calls += 1
            task.tokens += tokens_in + tokens_out
        number = f" {task.calls}" if task is not None else ""
        extra = f", {e.n} samples" if e.n > 1 else ""
        if e.spec and task is not None and e.spec != task.model:
            extra += f", {e.spec}"
        return (f"model call{number} ({label}{extra}): {tokens_in} in + {tokens_out} out tokens, "
                f"{e.latency_s:.1f}s{self._eta(task, e.ts)}")

    def _candidate(self, e: RepairCandidate, iid: str | None, task: _Task | None) -> str:
        cid = (e.candidate_id or e.node_id or "").split("/", 1)[-1]
        of = f" (one change of {e.part_of.split('/', 1)[-1]})" if e.part_of else ""
        return f"candidate {cid}{of}: {e.reason or e.status}{self._eta(task, e.ts)}"

    def _choice(self, e: RepairChoice, iid: str | None, task: _Task | None) -> str:
        cid = e.candidate_id.split("/", 1)[-1]
        verified = f"; its verification: {e.reason}" + ("; it changes no code" if e.noop else "")
        if e.chosen_by == "only":
            return f"decision: {cid}, the only candidate with a patch{verified}"
        among = f" of {e.among} candidates" if e.among else ""
        why = _CHOSEN_BY.get(str(e.chosen_by), "")
        return f"decision: {cid}{among}, chosen by {e.chosen_by}{': ' + why if why else ''}{verified}"

    def _confirm(self, e: RepairConfirm, iid: str | None, task: _Task | None) -> str:
        cid = e.candidate_id.split("/", 1)[-1]
        counts = f" ({e.whole[0]} of {e.whole[1]} pass)" if len(e.whole) == 2 else ""
        took = f" in {e.seconds:.1f}s" if e.seconds is not None else ""
        if e.held:
            return f"finalist {cid}: the whole suite agrees{counts}{took}"
        return f"finalist {cid}: the whole suite says worse than its {e.targeted} tests did{counts}{took}; choosing again"

    def _noop(self, e: RepairNoop, iid: str | None, task: _Task | None) -> str:
        what = ("nothing submitted: every candidate changes" if e.left_out == e.among
                else f"left out {e.left_out} of {e.among} candidates: they change")
        return f"decision: {what} only docstrings, comments or whitespace, and the tests fail at the base commit"

    def _mutants(self, e: RepairMutants, iid: str | None, task: _Task | None) -> str:
        names = ", ".join(f.rsplit(":", 1)[-1] for f in e.functions) or "no function"
        done = f"mutants: {e.tried} of {e.changes} single-site changes of {names} verified in {e.seconds:.0f}s"
        if e.passed:
            return f"{done}; {e.passed.split('/', 1)[-1]} passes (the search is not needed)"
        why = {"all": "", "limit": " (stopped at mutants_limit)",
               "seconds": " (stopped at mutants_seconds)"}.get(e.stopped, "")
        return f"{done}; none passes{why}"

    def _reproduce(self, e: RepairReproduce, iid: str | None, task: _Task | None) -> str:
        tests = e.source == "tests"
        what = f"reproduction: the report's failing tests ({len(e.tests)})" if tests else "reproduction script"
        if e.kept:
            return f"{what}: kept ({'they fail' if tests else 'it fails'} at the base commit as the issue says)"
        why = re.search(r"\(not counted: (.+)\)\s*$", e.output)
        return f"{what}: not kept" + (f" ({why.group(1)[:200]})" if why else "")

    def _repair_end(self, e: RepairEnd, iid: str | None, task: _Task | None) -> str | None:
        if task is not None and task.cannot_run and e.status is not RepairStatus.ENV_ERROR:
            return None  # the run stops on the pre-flight: its error is the one line to read
        graded = "" if e.resolved is None else (", resolved" if e.resolved else ", not resolved")
        chosen = f", {e.chosen.split('/', 1)[-1]} chosen by {e.chosen_by}" if e.chosen else ""
        if not e.chosen and e.chosen_by == "noop":
            chosen = ", every candidate changes no code"
        error = f" ({e.error[:200]})" if e.error else ""
        spent = ""
        if task is not None:
            spent = f"; {task.calls} model calls, {task.tokens} tokens, {format_duration(e.ts - task.started)}"
        if e.finished is False:  # cut short (Ctrl-C): not done, and a resume continues it
            return f"interrupted: the task did not finish{spent}"
        return f"done: {e.status_text}{graded}{chosen}{error}{spent}"


_LINES: dict[type[Event], Callable[[ProgressPrinter, Any, str | None, _Task | None], str | None]] = {
    RunStart: ProgressPrinter._run_start, RepairStart: ProgressPrinter._repair_start,
    RepairPreflight: ProgressPrinter._preflight, RepairTestTime: ProgressPrinter._test_time,
    RepairSearch: ProgressPrinter._search, NodeStart: ProgressPrinter._node_start, NodeEnd: ProgressPrinter._node_end,
    ModelCall: ProgressPrinter._model_call, RepairReproduce: ProgressPrinter._reproduce,
    RepairMutants: ProgressPrinter._mutants,
    RepairCandidate: ProgressPrinter._candidate, RepairConfirm: ProgressPrinter._confirm,
    RepairChoice: ProgressPrinter._choice, RepairNoop: ProgressPrinter._noop, RepairEnd: ProgressPrinter._repair_end,
}
"""The line each kind of event makes (the others make none)."""
