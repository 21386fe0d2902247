"""The training-data bar, end to end as a user runs it: `agentflow bench` of two example tasks with the embedded
model (Gemma 3 270M, best-of-n with n = 2, the Docker sandbox), then `agentflow export`. Every model turn's
token ids are the real llama-server's own tokenization of the recorded text and each completion token has a
log-prob; rewards are what the bench's graded files say; the branches of a search share a group id; the
parquet loads with Hugging Face `datasets`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.swe_fixtures import TASKS_FILE, docker_image, read_jsonl

from .conftest import SMALL, require_llama, start_small

pytestmark = [pytest.mark.llama, pytest.mark.docker]

__all__ = ["docker_image"]

BENCH_FLAGS = [
    "--slice", "0:2", "--strategy", "best_of_n", "-n", "2", "--model", f"local:{SMALL}", "--sandbox", "docker",
    # the mechanics, not the model's skill: the edit samples of the search and the task's own tests only
    "-c", "tests.feedback=task", "-c", "mutants=false", "-c", "rank=false", "-c", "spectrum=false", "-c", "reproduce=false", "-c", "vote=false",
    "-c", "keep_check=false", "-c", "split_edits=false", "-c", "noop_retries=0", "-c", "search.max_attempts=1",
    "-c", "sampling.max_tokens=96", "-c", "max_prompt_chars=2500", "-c", "model_options={parallel: 2}",
]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-m", "agentflow.cli.main", *args], capture_output=True, text=True, env=env,
                          timeout=3000, check=False)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, docker_image: str) -> Iterator[tuple[Path, Path]]:
    """(the bench's run folder, its parquet export)."""
    require_llama()
    root = tmp_path_factory.mktemp("bench")
    run, out = root / "run", root / "train.parquet"
    bench = _cli("bench", str(TASKS_FILE), *BENCH_FLAGS, "-o", str(run), "-q")
    assert bench.returncode == 0, bench.stderr[-3000:]
    export = _cli("export", str(run), "--format", "parquet", "-o", str(out))
    assert export.returncode == 0, export.stderr[-3000:]
    yield run, out


@pytest.fixture(scope="module")
def rows(exported: tuple[Path, Path]) -> list[dict[str, Any]]:
    pyarrow = pytest.importorskip("pyarrow.parquet")
    return list(pyarrow.read_table(exported[1]).to_pylist())


def _turns(run: Path) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(run / "events.jsonl") if e["kind"] == "model.turn"]


def test_every_model_turn_is_a_row_with_the_servers_own_tokens_and_a_logprob_each(
        exported: tuple[Path, Path], rows: list[dict[str, Any]]) -> None:
    turns = _turns(exported[0])
    assert len(turns) >= 4  # two tasks, two branches each
    assert len(rows) == sum(len(t["data"]["samples"]) for t in turns)
    server = start_small(parallel=1, ctx=2048)  # the same model file: the same tokenizer
    try:
        with httpx.Client(timeout=60) as client:
            def tokenize(text: str, *, special: bool) -> list[int]:
                reply = client.post(server.url("/tokenize"), headers=server.headers,
                                    json={"content": text, "add_special": special, "parse_special": True})
                reply.raise_for_status()
                return [int(t) for t in reply.json()["tokens"]]

            for row in rows:
                assert row["tokens_available"], row["tokens_missing"]
                assert row["response_ids"] == tokenize(row["completion_text"], special=False), row["trajectory_id"]
                assert row["prompt_token_ids"] == tokenize(row["prompt_text"], special=True), row["trajectory_id"]
                assert len(row["rollout_logprobs"]) == len(row["response_ids"]) > 0
                assert all(lp <= 0.0 for lp in row["rollout_logprobs"])
                assert row["input_ids"] == row["prompt_token_ids"] + row["response_ids"]
                assert row["loss_mask"] == [0] * len(row["prompt_token_ids"]) + [1] * len(row["response_ids"])
                assert row["model_file_sha256"] and len(row["model_file_sha256"]) == 64
    finally:
        server.stop_sync()


def _graded_candidates(run: Path) -> dict[str, float | None]:
    """candidate id -> what the bench's graded candidates file says of it (score, else passed; None: not graded)."""
    graded: dict[str, float | None] = {}
    for cand in read_jsonl(run / "candidates.jsonl"):
        verification = cand.get("verification") or {}
        score, passed = verification.get("score"), verification.get("passed")
        graded[cand["candidate_id"]] = float(score) if score is not None else (
            float(passed) if passed is not None else None)
    return graded


def test_rewards_are_the_graded_results(exported: tuple[Path, Path], rows: list[dict[str, Any]]) -> None:
    run = exported[0]
    graded = _graded_candidates(run)
    resolved = json.loads((run / "report.json").read_text())["resolved_ids"]
    seen = set()
    for row in rows:
        if row["node_id"] in graded:  # an edit sample: the candidate's own verification
            seen.add(row["node_id"])
            assert row["reward"] == graded[row["node_id"]], row["trajectory_id"]
            assert row["reward_source"].startswith("repair candidate")
        else:  # another call of a task: whether the task was resolved
            outcome = json.loads((run / "instances" / row["task_id"] / "outcome.json").read_text())
            expected = None if (outcome.get("report") or {}).get("resolved") is None else float(
                row["task_id"] in resolved)
            assert row["reward"] == expected, row["trajectory_id"]
    assert seen == set(graded)  # every graded candidate's sample was exported


def test_the_branches_of_a_search_share_a_group_and_other_tasks_do_not(
        exported: tuple[Path, Path], rows: list[dict[str, Any]]) -> None:
    parents = {c["candidate_id"]: c["parent_id"] for c in read_jsonl(exported[0] / "candidates.jsonl")}
    groups: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        if row["node_id"] in parents:
            groups[parents[row["node_id"]]].add(row["group_id"])
    siblings = defaultdict(list)
    for cand, parent in parents.items():
        siblings[parent].append(cand)
    assert any(len(c) >= 2 for c in siblings.values())  # best-of-n drew two branches from each task's root
    assert all(len(g) == 1 for g in groups.values())  # siblings: one group
    firsts = [next(iter(g)) for g in groups.values()]
    assert len(firsts) == len(set(firsts)) == len(siblings)  # children of other parents: other groups
    assert len({r["task_id"] for r in rows}) == 2


def test_the_parquet_loads_with_datasets(exported: tuple[Path, Path], rows: list[dict[str, Any]]) -> None:
    datasets = pytest.importorskip("datasets")
    data = datasets.load_dataset("parquet", data_files=str(exported[1]), split="train")
    assert data.num_rows == len(rows)
    assert data["response_ids"] == [r["response_ids"] for r in rows]
    assert data["group_id"] == [r["group_id"] for r in rows]
