"""`agentflow export`: every model call of a run as a training row (messages, token ids with the generation mask,
log-probs, reward, group id); search siblings share a group id; the parquet loads with Hugging Face `datasets`;
a sample whose text held a secret keeps no token ids."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from agentflow.events import EventLog
from agentflow.events.kinds import RepairEnd
from agentflow.graph import RunHandles, WorkflowRunner, spec_from_dict
from agentflow.models.base import ChatRequest, ChatResponse, Choice, Message, TokenTrace
from agentflow.models.testing import FunctionModel
from agentflow.observe.export import export_run, trajectory_rows

pytest.importorskip("pyarrow")


def _traced(text: str, prompt: str = "P") -> ChatResponse:
    """A reply with a token trace, as a llama-server model gives one (ids: one per character here)."""
    trace = TokenTrace(prompt_text=prompt, prompt_ids=[1, *map(ord, prompt)], completion_text=text,
                       completion_ids=[ord(c) for c in text], logprobs=[-0.5] * len(text), source="test")
    return ChatResponse(choices=[Choice(message=Message.assistant(text), finish_reason="stop", trace=trace)],
                        identity={"model": "scripted", "file_sha256": "ab" * 32})


def score(state: dict[str, Any]) -> dict[str, Any]:
    """The branch's value: the length of the agent's answer."""
    return {"score": len((state.get("answer") or {}).get("text", ""))}


def _search_workflow(n: int) -> Any:
    return spec_from_dict({
        "name": "s", "state": {"task": {"type": "str"}, "answer": {"type": "dict"}, "score": {"type": "int"},
                               "report": {"type": "dict"}},
        "nodes": {"go": {"search": {"n": n, "value": "score", "value_scale": 100}, "output": "report", "next": "END",
                         "subgraph": {"name": "try", "nodes": {
                             "solve": {"agent": "critic", "output": "answer", "next": "score",
                                       "args": {"config": {"tools": [],
                                                           "output_schema": "agentflow.agents.schemas:FinalText"}}},
                             "score": {"fn": "tests.observe.test_export:score", "next": "END"}}}}},
    })


async def _search_run(tmp_path: Path, n: int) -> Path:
    counter = itertools.count(1)

    def reply(request: ChatRequest) -> ChatResponse:
        return _traced("x" * next(counter))

    run = tmp_path / "run"
    events = EventLog(run / "events.jsonl", run_id="run1")
    ctx = RunHandles(chat_model=FunctionModel(reply), events=events)
    async with WorkflowRunner(_search_workflow(n), run_dir=run, context=ctx) as runner:
        result = await runner.start({"task": "say x"}, thread_id="t")
    events.close()
    assert result.status == "done", result.errors
    return run


@pytest.mark.parametrize("n", [2, 3, 5])
async def test_search_siblings_share_a_group_and_carry_their_value(tmp_path: Path, n: int) -> None:
    run = await _search_run(tmp_path, n)
    rows = trajectory_rows(run)

    assert len(rows) == n  # one agent call per branch
    assert len({r["group_id"] for r in rows}) == 1  # the branches are siblings: one group
    assert len({r["trajectory_id"] for r in rows}) == n
    for row in rows:
        text = row["completion_text"]
        assert row["tokens_available"] and row["response_ids"] == [ord(c) for c in text]
        assert row["loss_mask"] == [0] * len(row["prompt_token_ids"]) + [1] * len(row["response_ids"])
        assert row["input_ids"] == row["prompt_token_ids"] + row["response_ids"]
        assert len(row["rollout_logprobs"]) == len(row["response_ids"])
        assert row["reward"] == pytest.approx(len(text) / 100)
        assert row["messages"][-1]["role"] == "assistant" and row["messages"][0]["role"] == "system"
        assert json.loads(row["model_identity"])["file_sha256"] == "ab" * 32


@pytest.mark.parametrize("fmt", ["parquet", "verl"])
async def test_the_parquet_loads_with_datasets(tmp_path: Path, fmt: str) -> None:
    datasets = pytest.importorskip("datasets")
    run = await _search_run(tmp_path, 3)
    out = tmp_path / f"{fmt}.parquet"

    assert export_run(run, out, fmt) == 3  # type: ignore[arg-type]
    data = datasets.load_dataset("parquet", data_files=str(out), split="train")

    assert data.num_rows == 3
    if fmt == "verl":
        assert {"data_source", "prompt", "reward_model", "extra_info", "uid", "responses", "response_mask",
                "rollout_log_probs"} <= set(data.column_names)
        assert len(set(data["uid"])) == 1 and all(len(p) == 2 for p in data["prompt"])
    else:
        assert {"prompt_token_ids", "response_ids", "loss_mask", "rollout_logprobs", "reward", "group_id",
                "messages"} <= set(data.column_names)
        assert all(len(m) == len(r) for m, r in zip(data["response_mask"], data["response_ids"], strict=True))


async def test_a_backend_without_tokens_keeps_the_messages_and_says_so(tmp_path: Path) -> None:
    from agentflow.agents import Agent, AgentConfig
    from agentflow.tools import ToolContext

    events = EventLog(tmp_path / "run" / "events.jsonl", run_id="r")
    model = FunctionModel(lambda request: "plain answer")
    await Agent(AgentConfig(name="a"), model=model).run("hello", ctx=ToolContext(events=events))
    events.close()

    (row,) = trajectory_rows(tmp_path / "run")
    assert not row["tokens_available"] and row["response_ids"] is None
    assert "gave no token ids" in row["tokens_missing"]
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
    assert row["messages"][-1]["content"] == "plain answer"


@pytest.mark.parametrize("where", ["completion", "prompt"])
async def test_token_ids_of_a_text_holding_a_secret_are_not_written(tmp_path: Path, where: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from agentflow.agents import Agent, AgentConfig
    from agentflow.secrets import register_secret
    from agentflow.tools import ToolContext

    secret = "sk-live-0123456789abcdefSECRET"
    register_secret(secret)
    text, prompt = ("the key is " + secret, "P") if where == "completion" else ("fine", "key " + secret)
    events = EventLog(tmp_path / "run" / "events.jsonl", run_id="r")
    model = FunctionModel(lambda request: _traced(text, prompt))
    await Agent(AgentConfig(name="a"), model=model).run("hello", ctx=ToolContext(events=events))
    events.close()

    raw = (tmp_path / "run" / "events.jsonl").read_text()
    assert secret not in raw and str([ord(c) for c in secret])[1:-1] not in raw
    (row,) = trajectory_rows(tmp_path / "run")
    assert row["response_ids"] is None and row["prompt_token_ids"] is None and row["rollout_logprobs"] is None
    assert "held a secret" in row["tokens_missing"]
    out = tmp_path / "o.parquet"
    export_run(tmp_path / "run", out)
    assert secret.encode() not in out.read_bytes()


def test_a_folder_without_events_is_a_user_error(tmp_path: Path) -> None:
    from agentflow.errors import UserError

    with pytest.raises(UserError, match="no events.jsonl"):
        trajectory_rows(tmp_path)
    with pytest.raises(UserError, match="unknown export format"):
        export_run(tmp_path, tmp_path / "o.parquet", "csv")  # type: ignore[arg-type]


async def test_beam_children_of_one_parent_share_a_group_that_other_steps_do_not(tmp_path: Path) -> None:
    spec = _search_workflow(1).model_dump()
    go = spec["nodes"]["go"]
    go["search"] = {"strategy": "beam", "n": 1, "expand": 2, "value": "score", "value_scale": 100, "max_depth": 3}
    nodes = go["subgraph"]["nodes"]
    nodes["solve"]["next"] = "again"
    nodes["again"] = {**nodes["solve"], "next": "score"}
    counter = itertools.count(1)
    run = tmp_path / "run"
    events = EventLog(run / "events.jsonl", run_id="run1")
    ctx = RunHandles(chat_model=FunctionModel(lambda request: _traced("x" * next(counter))), events=events)
    async with WorkflowRunner(spec_from_dict(go_spec(spec)), run_dir=run, context=ctx) as runner:
        result = await runner.start({"task": "say x"}, thread_id="t")
    events.close()
    assert result.status == "done", result.errors

    rows = trajectory_rows(run)
    by_branch = {r["trajectory_id"].split(":")[1]: r["group_id"] for r in rows}
    assert by_branch["go/b0"] == by_branch["go/b1"] == "run1:go"
    kept = next(b for b in ("go/b0", "go/b1") if f"{b}" in {g.split(":", 1)[1] for g in by_branch.values()})
    assert by_branch["go/b2"] == by_branch["go/b3"] == f"run1:{kept}" != by_branch["go/b0"]


def go_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A dumped spec as `spec_from_dict` takes it (without the fields it fills itself)."""
    return json.loads(json.dumps(spec, default=str))


@pytest.mark.parametrize("fmt", ["parquet", "verl"])
async def test_the_cli_writes_the_file_and_refuses_bad_input_in_one_line(tmp_path: Path, fmt: str) -> None:
    import os
    import subprocess
    import sys

    run = await _search_run(tmp_path, 2)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agentflow.cli.main", "export", *argv], env=env, check=False,
                              capture_output=True, text=True, timeout=120)

    done = cli(str(run), "--format", fmt, "-o", str(tmp_path / "out.parquet"))
    assert done.returncode == 0, done.stderr
    assert "wrote 2 rows" in done.stdout and (tmp_path / "out.parquet").is_file()
    for argv in ([str(run), "--format", "csv", "-o", str(tmp_path / "x")], [str(tmp_path / "none"), "-o", "x"]):
        bad = cli(*argv)
        assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


async def test_repair_samples_carry_their_tests_and_are_grouped_by_parent_across_tasks(tmp_path: Path) -> None:
    """A bench-shaped folder (two tasks), written by the repair's own writers: the coder instrumented per task
    and attributed per candidate (`with_node`), the candidates' events as the repair writes them
    (`candidate_event`), `repair.end` per task."""
    from agentflow.models.instrumented import InstrumentedModel
    from agentflow.repair.nodetypes.runtime import candidate_event
    from agentflow.repair.outcome import Candidate
    from agentflow.repair.verify.workbench import Verification

    model = FunctionModel(lambda request: _traced("patch"))
    plan = {"t1": [("c1", None, 1.0), ("c2", None, 0.0), ("c3", "c1", 0.5), ("c4", "c1", 0.25)],
            "t2": [("c1", None, 0.0), ("c2", None, 0.0)]}
    for task, cands in plan.items():
        events = EventLog(tmp_path / "bench" / task / "events.jsonl", run_id="bench")
        coder = InstrumentedModel(model, events=events, node_id=task)
        for cand, parent, score_ in cands:
            cid, pid = f"{task}/{cand}", f"{task}/{parent}" if parent else None
            await coder.with_node(cid, pid).chat(ChatRequest(messages=[Message.user("fix it")]))
            events.write(candidate_event(Candidate(instance_id=task, candidate_id=cid, parent_id=pid, status="ok",
                                                   verification=Verification(passed=score_ == 1.0, score=score_))))
        events.write(RepairEnd(node_id=task, instance_id=task, status="submitted", chosen=f"{task}/c1", resolved=task == "t1"))
        events.close()

    rows = {r["node_id"]: r for r in trajectory_rows(tmp_path / "bench")}
    assert len(rows) == 6
    assert {k: r["reward"] for k, r in rows.items()} == {
        f"{t}/{c}": s for t, cands in plan.items() for c, _, s in cands}
    assert rows["t1/c1"]["group_id"] == rows["t1/c2"]["group_id"] == "t1:root"
    assert rows["t1/c3"]["group_id"] == rows["t1/c4"]["group_id"] == "t1:t1/c1"
    assert rows["t2/c1"]["group_id"] == "t2:root" != rows["t1/c1"]["group_id"]
    assert [k for k, r in rows.items() if r["chosen"]] == ["t1/c1", "t2/c1"]
    assert {r["task_id"] for r in rows.values()} == {"t1", "t2"}
