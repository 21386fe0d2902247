"""Synthetic run directories of the size the viewer must stay usable at: a 200-task bench and a 500-node MCTS
tree, written as a real run writes them (the same event kinds and files: each task's repair workflow with a
graph search node whose branches run `edit -> test`), from a seeded generator."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from agentflow.events import parse_event

SEARCH = "search"
"""The repair workflow's search node."""


def _patch(rng: random.Random, n: int) -> str:
    lines = [f"+    value_{rng.randrange(10**6)} = compute({i}, {rng.random():.4f})" for i in range(n)]
    head = f"diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -10,3 +10,{3 + n} @@\n"
    return head + "\n".join(lines) + "\n"


def _tests(rng: random.Random, passed: bool) -> dict[str, Any]:
    f2p = [f"tests/test_mod.py::test_bug[{i}]" for i in range(5)]
    p2p = [f"tests/test_mod.py::test_ok_{i}" for i in range(15)]
    fail = [] if passed else rng.sample(f2p, rng.randint(1, 5))
    return {"FAIL_TO_PASS": {"success": [t for t in f2p if t not in fail], "failure": fail},
            "PASS_TO_PASS": {"success": p2p, "failure": []}}


class _Writer:
    def __init__(self, out: Path) -> None:
        self.out, self.t, self.lines = out, 1_700_000_000.0, []

    def emit(self, kind: str, node_id: str | None = None, parent_id: str | None = None, dt: float = 0.05,
             **data: Any) -> None:
        self.t += dt
        event = parse_event({"ts": self.t, "run_id": self.out.name, "kind": kind, "node_id": node_id,
                             "parent_id": parent_id, **data})  # a run's writers write only what parses
        self.lines.append(event.model_dump_json())



def _node(w: _Writer, iid: str, name: str, writes: list[str], dt: float = 0.05, **tags: Any) -> None:
    """A graph node of the task's workflow that ran and wrote `writes` (`tags`: a search branch's)."""
    w.emit("node.start", f"{iid}/{name}", instance_id=iid, type=f"swe.{name}", **tags)
    w.emit("node.end", f"{iid}/{name}", dt=dt, instance_id=iid, type=f"swe.{name}", writes=writes, **tags)


def _record(branch: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A `search.node` event's data, as `agentflow.graph.search.tree.Branch.record` writes it."""
    return {"search": SEARCH, "strategy": "mcts", "thread": branch["thread"], "depth": branch["depth"],
            "action": branch["action"], "value": branch["value"], "mean": branch["value"], "visits": branch["visits"],
            "terminal": branch["terminal"], "error": None, "snapshot_id": f"{branch['depth']:040x}", "diff_id": None,
            **extra}


def _instance(w: _Writer, rng: random.Random, iid: str, nodes: int) -> tuple[list[dict], dict]:
    """One task's events (a graph search of `nodes` tree nodes: the root and MCTS-shaped branches, one attempt
    each) and its candidates."""
    w.emit("repair.start", iid, instance_id=iid, search=None, model="replay:synthetic", workflow="repair",
           expected_calls={"baseline": 0, "search": nodes - 1, "choose": 0}, step_limit=None, wall_time_s=None)
    w.emit("run.start", instance_id=iid, workflow="repair", thread_id="repair")
    _node(w, iid, "baseline", ["base", "issue"])
    search_id = f"{iid}/{SEARCH}"
    w.emit("node.start", search_id, instance_id=iid, type="search", strategy="mcts")
    root = {"id": "root", "node": search_id, "cand": f"{iid}/root", "parent": None, "thread": None, "depth": 0,
            "action": None, "value": 0.0, "visits": 0, "terminal": False}
    w.emit("search.node", search_id, None, instance_id=iid, **_record(root))
    w.emit("repair.base", iid, instance_id=iid, passed=False, score=0.7, feedback="task", reproduced=None,
           edit_format="search_replace", suspects=[])
    tree, cands, winner = [root], [], rng.randrange(1, nodes)
    for n in range(1, nodes):
        parent = tree[rng.randrange(max(0, len(tree) - 8), len(tree))] if n > 1 else root
        bid = f"b{n - 1}"
        branch = {"id": bid, "node": f"{search_id}/{bid}", "cand": f"{iid}/{bid}.{n}", "parent": parent,
                  "thread": f"repair~{SEARCH}~{bid}" if parent is root else f"{parent['thread']}~{bid}",
                  "depth": parent["depth"] + 1, "action": "edit → test", "visits": 0}
        tags = {"search": SEARCH, "branch": bid}
        passed = n == winner
        value = 1.0 if passed else round(rng.uniform(0.5, 0.95), 3)
        w.emit("search.branch", branch["node"], instance_id=iid, event="start", parent=parent["id"], search=SEARCH)
        w.emit("node.start", f"{iid}/edit", instance_id=iid, type="swe.edit", **tags)
        w.emit("model.call", branch["cand"], parent["cand"], dt=0.2, spec="replay:synthetic", model="synthetic",
               usage={"input_tokens": 800, "output_tokens": 60, "cost_usd": 0.0004}, latency_s=0.18, n=1,
               cached=False, finish_reasons=["stop"])
        w.emit("node.end", f"{iid}/edit", instance_id=iid, type="swe.edit", writes=["edit", "drawn", "focus"], **tags)
        w.emit("node.start", f"{iid}/test", instance_id=iid, type="swe.test", **tags)
        w.emit("sandbox.exec", instance_id=iid, sandbox="s1", command="python -m pytest -q tests",
               exit_code=0 if passed else 1, duration_s=0.3, dt=0.3,
               timed_out=False, limit_hit=None, truncated=False)
        w.emit("repair.candidate", branch["cand"], parent["cand"], instance_id=iid, candidate_id=branch["cand"],
               status="ok", passed=passed, score=value, reason="tests pass" if passed else "tests fail", part_of=None)
        w.emit("repair.attempt", branch["cand"], parent["cand"], instance_id=iid, value=value, passed=passed,
               dropped_test_files=[], duration_s=0.35, part_of=None, **tags)
        w.emit("node.end", f"{iid}/test", instance_id=iid, type="swe.test", writes=["candidate", "attempts", "verdict"],
               **tags)
        w.emit("search.branch", branch["node"], instance_id=iid, event="end", search=SEARCH, value=value,
               terminal=passed, error=None, setup_ms=2.5, restore_ms=0.0)
        branch |= {"value": value, "terminal": passed}
        w.emit("search.node", branch["node"], parent["node"], instance_id=iid, **_record(branch))
        for up in (branch, *_ancestors(branch)):  # the expansion backed up to the root
            up["visits"] += 1
        tree.append(branch)
        cands.append({"instance_id": iid, "candidate_id": branch["cand"], "parent_id": parent["cand"], "status": "ok",
                      "patch": _patch(rng, rng.randint(3, 12)), "edit_errors": [], "sample": n,
                      "verification": {"passed": passed, "score": value, "kind": "task_tests",
                                       "tests_status": _tests(rng, passed)}})
    chosen = tree[winner]
    for branch in tree:  # the tree's final record, root first; the search's choice marked
        mark = {"chosen": True, "select": "value"} if branch is chosen else {}
        parent_node = branch["parent"]["node"] if branch["parent"] else None
        w.emit("search.node", branch["node"], parent_node, dt=0.001, instance_id=iid, **_record(branch, final=True, **mark))
    w.emit("node.end", search_id, instance_id=iid, type="search", writes=["attempts", "drawn", "search"],
           chosen=chosen["id"], branches=nodes - 1, value=1.0)
    w.emit("node.start", f"{iid}/choose", instance_id=iid, type="swe.choose")
    w.emit("repair.choice", iid, instance_id=iid, candidate_id=chosen["cand"], chosen_by="tests", among=nodes - 1,
           reason="tests pass", noop=False)
    w.emit("node.end", f"{iid}/choose", instance_id=iid, type="swe.choose", writes=["chosen", "final"])
    w.emit("run.end", instance_id=iid, thread_id="repair", status="done", next=[], stop_reason="done", errors={})
    w.emit("repair.end", iid, instance_id=iid, status="submitted", chosen=chosen["cand"], chosen_by="tests",
           resolved=True, error=None)
    report = {"status": "submitted", "resolved": True, "cost_usd": round(0.0004 * (nodes - 1), 6),
              "tests_status": _tests(rng, True), "duration_s": 1.0}
    return cands, report


def _ancestors(branch: dict[str, Any]) -> list[dict[str, Any]]:
    out, parent = [], branch["parent"]
    while parent is not None:
        out.append(parent)
        parent = parent["parent"]
    return out


def write_synthetic_run(out: Path, tasks: int, nodes_per_task: int, seed: int = 0) -> Path:
    """A bench (or, with one task, a repair) run directory of `tasks` tasks with `nodes_per_task` tree nodes each."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    w = _Writer(out)
    w.emit("run.start", total=tasks, todo=tasks, resume=False, search=None, executor="in-process")

    all_cands, instances, preds = [], {}, []
    for i in range(tasks):
        iid = f"synth__pkg-{i}"
        cands, report = _instance(w, rng, iid, nodes_per_task)
        all_cands += cands
        instances[iid] = report
        chosen = next(c for c in cands if c["verification"]["passed"])
        preds.append({"instance_id": iid, "model_name_or_path": "synthetic", "model_patch": chosen["patch"]})
        inst = out / "instances" / iid
        inst.mkdir(parents=True, exist_ok=True)
        (inst / "outcome.json").write_text(json.dumps({"instance_id": iid, "status": "submitted",
                                                       "chosen": chosen["candidate_id"], "chosen_by": "tests"}))
    w.emit("run.end", resolved=tasks, statuses={"submitted": tasks})
    (out / "events.jsonl").write_text("\n".join(w.lines) + "\n")
    (out / "candidates.jsonl").write_text("".join(json.dumps(c) + "\n" for c in all_cands))
    (out / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (out / "report.json").write_text(json.dumps({
        "total_instances": tasks, "submitted_instances": tasks, "resolved_instances": tasks,
        "resolved_ids": sorted(instances), "statuses": {"submitted": tasks}, "instances": instances}))
    (out / "config.resolved.yaml").write_text(
        f"step_limit: 40\nbudget_usd: 0.5\nworkflow: repair\nnodes:\n  {SEARCH}:\n    strategy: mcts\n"
        f"    n: {nodes_per_task - 1}\n    value: value\n")
    return out
