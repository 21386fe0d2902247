"""`agentflow export RUN --format parquet|verl -o OUT`: a run's model calls as training data.

Every model call of a run is a `model.turn` event (written by `InstrumentedModel`): the messages the model read,
each sample with its token trace where the backend has one (token ids, per-token log-probs), the sampling
settings and the model's identity. This module reads them from every `events.jsonl` under RUN (one run, or a
bench run's tasks), attaches the reward the run's verifiers gave (a repair candidate's tests, a search branch's
value, the task's outcome) and a group id (the task, and the search node whose children are siblings), and
writes one row per sample to a parquet file that Hugging Face `datasets` loads (fields:
docs/concepts/training-data.md).

Everything written passes through `secrets.redact` again; a sample whose text redaction changes loses its
token ids and log-probs (they would spell the secret out) and says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from agentflow.errors import DependencyMissing, UserError
from agentflow.events import Event, read_events
from agentflow.events.kinds import (
    BranchMoment,
    ModelTurn,
    RepairCandidate,
    RepairEnd,
    SearchBranch,
    SearchNode,
)
from agentflow.models.base import TokenTrace
from agentflow.secrets import redact

ExportFormat = Literal["parquet", "verl"]
FORMATS: tuple[str, ...] = get_args(ExportFormat)


@dataclass
class _Rewards:
    """What a run's verifiers said, by the ids its model turns carry."""

    candidates: dict[str, dict[str, Any]] = field(default_factory=dict)
    """repair candidate id -> {reward, task, parent}."""
    chosen: set[str] = field(default_factory=set)
    """Candidate ids a repair chose."""
    tasks: dict[str, float | None] = field(default_factory=dict)
    """repair task id -> 1.0 resolved / 0.0 not (None: not graded)."""
    branches: dict[str, float] = field(default_factory=dict)
    """search branch node id (`search/bN`) -> its value."""
    parents: dict[str, str | None] = field(default_factory=dict)
    """search tree node id -> its parent's node id."""

    def add(self, event: Event) -> None:
        match event:
            case RepairCandidate(candidate_id=cid) if cid:
                reward = event.score if event.score is not None else (
                    float(event.passed) if event.passed is not None else None)
                self.candidates[cid] = {"reward": reward, "task": event.instance_id, "parent": event.parent_id}
            case RepairEnd(instance_id=iid) if iid:
                if event.chosen:
                    self.chosen.add(event.chosen)
                self.tasks[iid] = None if event.resolved is None else float(event.resolved)
            case SearchBranch(event=BranchMoment.END, node_id=node) if node and event.value is not None:
                self.branches[node] = event.value
            case SearchNode(node_id=node) if node:
                self.parents[node] = event.parent_id


def _event_files(run: Path) -> list[Path]:
    if not run.exists():
        raise UserError(f"{run}: no such run folder", hint="give the folder `agentflow run/repair/bench -o` wrote")
    files = [run] if run.is_file() else sorted(run.rglob("events.jsonl"))
    if not files:
        raise UserError(f"{run}: no events.jsonl in it", hint="give the folder of a run (it holds events.jsonl)")
    return files


def _turns(files: list[Path]) -> tuple[list[tuple[Path, ModelTurn]], _Rewards]:
    turns: list[tuple[Path, ModelTurn]] = []
    rewards = _Rewards()
    for path in files:
        for event in read_events(path):
            if isinstance(event, ModelTurn):
                turns.append((path, event))
            else:
                rewards.add(event)
    return turns, rewards


def _message(m: dict[str, Any]) -> dict[str, Any]:
    """A message as a row's struct: one shape for every message (tool calls as JSON text)."""
    calls = m.get("tool_calls") or []
    return {"role": str(m.get("role", "")), "content": redact(m.get("content") or ""),
            "name": m.get("name"), "tool_call_id": m.get("tool_call_id"),
            "tool_calls": redact(json.dumps(calls, sort_keys=True)) if calls else None}


@dataclass
class _Where:
    """Which task, trajectory and group one model turn belongs to, and what the verifiers said of it."""

    task: str
    trajectory: str
    group: str
    reward: float | None
    reward_source: str
    chosen: bool | None


def _where(path: Path, event: Event, rewards: _Rewards, run_root: Path) -> _Where:
    run_id = event.run_id or (path.parent.name if path.parent != run_root.parent else run_root.name)
    node, parent = event.node_id or "", event.parent_id
    search, branch = event.search, event.branch
    cand = rewards.candidates.get(node)
    if cand is not None:  # a repair sample: siblings are the candidates drawn from the same parent
        task = str(cand["task"] or run_id)
        return _Where(task, f"{run_id}:{node}", f"{task}:{cand['parent'] or parent or 'root'}", cand["reward"],
                      "repair candidate's tests (score, else passed)", node in rewards.chosen)
    if search and branch:  # a step of a search branch: siblings are the children of the branch's parent
        branch_id = f"{search}/{branch}"
        group = rewards.parents.get(branch_id) or str(search)
        value = rewards.branches.get(branch_id)
        return _Where(run_id, f"{run_id}:{branch_id}:{node}", f"{run_id}:{group}", value,
                      "search branch value" if value is not None else "none recorded", None)
    task = node if node in rewards.tasks else run_id
    resolved = rewards.tasks.get(task)
    return _Where(task, f"{run_id}:{node}", task, resolved,
                  "task resolved (repair outcome)" if resolved is not None else "none recorded", None)


def _token_fields(sample: dict[str, Any], spec: str) -> dict[str, Any]:
    raw = sample.get("trace")
    trace = TokenTrace.model_validate(raw).scrubbed() if raw else None
    prompt_ids = trace.prompt_ids if trace else None
    response_ids = trace.completion_ids if trace else None
    missing = None
    if trace is None:
        missing = f"the backend ({spec}) gave no token ids or log-probs for this call (a hosted API or a test model); the messages are kept"
    elif trace.missing:
        missing = trace.missing
    elif response_ids is None:
        missing = f"the backend gave no completion ids ({trace.source})"
    elif prompt_ids is None:
        missing = ("the prompt's ids are not recorded: the server's tokenization of the prompt text did not have "
                   "its own count of prompt tokens")
    full = prompt_ids is not None and response_ids is not None
    return {
        "tokens_available": full,
        "tokens_missing": missing,
        "prompt_text": trace.prompt_text if trace else None,
        "completion_text": trace.completion_text if trace else None,
        "prompt_token_ids": prompt_ids,
        "response_ids": response_ids,
        "input_ids": (prompt_ids + response_ids) if full else None,  # type: ignore[operator]
        "loss_mask": ([0] * len(prompt_ids) + [1] * len(response_ids)) if full else None,  # type: ignore[arg-type]
        "response_mask": [1] * len(response_ids) if response_ids is not None else None,
        "rollout_logprobs": trace.logprobs if trace else None,
        "token_source": trace.source if trace else None,
    }


def trajectory_rows(run: str | Path) -> list[dict[str, Any]]:
    """One row per sample of every model call under `run` (see the module doc and training-data.md)."""
    root = Path(run)
    turns, rewards = _turns(_event_files(root))
    rows: list[dict[str, Any]] = []
    turn_index: dict[str, int] = {}
    for path, event in turns:
        where = _where(path, event, rewards, root)
        index = turn_index.get(where.trajectory, 0)
        turn_index[where.trajectory] = index + 1
        identity = {str(k): str(v) for k, v in event.identity.items()}
        messages = [_message(m) for m in event.messages]
        for sample_index, sample in enumerate(event.samples):
            reply = _message(sample.get("message") or {})
            rows.append({
                "run_id": event.run_id, "task_id": where.task, "group_id": where.group,
                "trajectory_id": where.trajectory, "turn": index, "sample": sample_index,
                "node_id": event.node_id, "parent_id": event.parent_id,
                "messages": [*messages, reply], "prompt_messages": len(messages),
                "finish_reason": sample.get("finish_reason"),
                **_token_fields(sample, event.spec),
                "reward": where.reward, "reward_source": where.reward_source, "chosen": where.chosen,
                "sampling": json.dumps(event.sampling, sort_keys=True),
                "model_spec": redact(event.spec), "model_identity": json.dumps(identity, sort_keys=True),
                "model_file_sha256": identity.get("file_sha256"), "cached": event.cached,
                "ts": event.ts,
            })
    return rows


def _schema(fmt: ExportFormat) -> Any:
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string()), ("name", pa.string()),
                         ("tool_call_id", pa.string()), ("tool_calls", pa.string())])
    ids, floats = pa.list_(pa.int64()), pa.list_(pa.float64())
    common = [
        ("run_id", pa.string()), ("task_id", pa.string()), ("group_id", pa.string()), ("trajectory_id", pa.string()),
        ("turn", pa.int64()), ("sample", pa.int64()), ("node_id", pa.string()), ("parent_id", pa.string()),
        ("prompt_messages", pa.int64()), ("finish_reason", pa.string()), ("tokens_available", pa.bool_()),
        ("tokens_missing", pa.string()), ("prompt_text", pa.string()), ("completion_text", pa.string()),
        ("reward", pa.float64()), ("reward_source", pa.string()), ("chosen", pa.bool_()), ("sampling", pa.string()),
        ("model_spec", pa.string()), ("model_identity", pa.string()), ("model_file_sha256", pa.string()),
        ("cached", pa.bool_()), ("ts", pa.float64()), ("token_source", pa.string()),
    ]
    if fmt == "verl":
        return pa.schema([
            ("data_source", pa.string()), ("prompt", pa.list_(message)), ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            ("extra_info", pa.struct([("index", pa.int64()), ("split", pa.string())])),
            ("uid", pa.string()), ("prompts", ids), ("responses", ids), ("response_mask", ids),
            ("rollout_log_probs", floats), ("response", message), *common,
        ])
    return pa.schema([
        *common, ("messages", pa.list_(message)), ("prompt_token_ids", ids), ("response_ids", ids),
        ("input_ids", ids), ("loss_mask", ids), ("response_mask", ids), ("rollout_logprobs", floats),
    ])


def _verl_row(row: dict[str, Any], index: int) -> dict[str, Any]:
    """A row in verl's names: its RL dataset fields (data_source, prompt, ability, reward_model, extra_info)
    and its rollout batch fields (prompts, responses, response_mask, rollout_log_probs, uid)."""
    prompt, response = row["messages"][:row["prompt_messages"]], row["messages"][row["prompt_messages"]]
    return {
        **{k: v for k, v in row.items() if k not in ("messages", "prompt_token_ids", "response_ids", "input_ids",
                                                        "loss_mask", "response_mask", "rollout_logprobs")},
        "data_source": "agentflow", "prompt": prompt, "response": response, "ability": "agent",
        "reward_model": {"style": "rule", "ground_truth": row["reward_source"]},
        "extra_info": {"index": index, "split": "train"}, "uid": row["group_id"],
        "prompts": row["prompt_token_ids"], "responses": row["response_ids"], "response_mask": row["response_mask"],
        "rollout_log_probs": row["rollout_logprobs"],
    }


def export_run(run: str | Path, out: str | Path, fmt: ExportFormat = "parquet") -> int:
    """Write the run's trajectories to parquet file `out` in format `fmt`; the number of rows written."""
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r}", hint=f"use one of: {', '.join(FORMATS)}")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise DependencyMissing("pyarrow", "train", "exporting training data") from None
    rows = trajectory_rows(run)
    if fmt == "verl":
        rows = [_verl_row(r, i) for i, r in enumerate(rows)]
    schema = _schema(fmt)
    table = pa.Table.from_pylist([{name: r.get(name) for name in schema.names} for r in rows], schema=schema)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, target)
    return len(rows)

