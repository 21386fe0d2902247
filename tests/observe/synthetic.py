"""Synthetic run directories of the size the viewer must stay usable at: a 200-task bench and a 500-node MCTS
tree, written as a real run writes them (the same event kinds and files), from a seeded generator."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from agentflow.events import Event


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
        self.lines.append(Event(ts=self.t, run_id=self.out.name, kind=kind, node_id=node_id, parent_id=parent_id,
                                data=data).model_dump_json())


def _instance(w: _Writer, rng: random.Random, iid: str, nodes: int, k: int) -> tuple[list[dict], dict]:
    """One task's events (an MCTS-shaped tree of `nodes` nodes, `k` children per expansion) and candidates."""
    w.emit("repair.start", iid, instance_id=iid, strategy="mcts", model="replay:synthetic")
    w.emit("repair.base", iid, instance_id=iid, passed=False, score=0.7, feedback="task")
    w.emit("search.node", f"{iid}/0", None, instance_id=iid, action=None, value=0.0, visits=0, depth=0,
           terminal=False, passed=None, strategy="mcts", usage={"input_tokens": 0, "output_tokens": 0})
    w.emit("search.start", instance_id=iid, strategy="mcts", k=k)
    ids, cands, winner = ["0"], [], rng.randrange(1, nodes)
    for n in range(1, nodes):
        parent = ids[rng.randrange(max(0, len(ids) - 8), len(ids))] if n > 1 else "0"
        node_id = f"{parent}.{sum(1 for i in ids if i.rsplit('.', 1)[0] == parent and i != parent)}"
        ids.append(node_id)
        cand, parent_cand = f"{iid}/c{n}", f"{iid}/root" if parent == "0" else f"{iid}/c{ids.index(parent)}"
        passed = n == winner
        w.emit("model.call", cand, parent_cand, dt=0.2, spec="replay:synthetic", model="synthetic",
               usage={"input_tokens": 800, "output_tokens": 60, "cost_usd": 0.0004}, latency_s=0.18, n=1,
               cached=False, finish_reasons=["stop"])
        w.emit("sandbox.exec", sandbox="s1", command="python -m pytest -q tests", exit_code=0 if passed else 1,
               duration_s=0.3, dt=0.3)
        value = 1.0 if passed else round(rng.uniform(0.5, 0.95), 3)
        w.emit("repair.attempt", cand, parent_cand, instance_id=iid, value=value, passed=passed, duration_s=0.35)
        w.emit("search.node", f"{iid}/{node_id}", f"{iid}/{parent}", instance_id=iid, action=f"edit {cand}",
               value=value, visits=1, depth=node_id.count("."), terminal=passed, passed=passed, strategy="mcts",
               usage={"input_tokens": 800, "output_tokens": 60})
        cands.append({"instance_id": iid, "candidate_id": cand, "parent_id": parent_cand, "status": "ok",
                      "patch": _patch(rng, rng.randint(3, 12)), "edit_errors": [],
                      "verification": {"passed": passed, "score": value, "kind": "task_tests",
                                       "tests_status": _tests(rng, passed)}})
    w.emit("search.end", instance_id=iid, strategy="mcts", expansions=nodes - 1)
    chosen = f"{iid}/c{winner}"
    w.emit("repair.end", iid, instance_id=iid, status="submitted", chosen=chosen, chosen_by="tests", resolved=True)
    report = {"status": "submitted", "resolved": True, "cost_usd": round(0.0004 * (nodes - 1), 6),
              "tests_status": _tests(rng, True), "duration_s": 1.0}
    return cands, report


def write_synthetic_run(out: Path, tasks: int, nodes_per_task: int, seed: int = 0) -> Path:
    """A bench (or, with one task, a repair) run directory of `tasks` tasks with `nodes_per_task` tree nodes each."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    w = _Writer(out)
    w.emit("run.start", total=tasks, todo=tasks, resume=False, strategy="mcts")
    all_cands, instances, preds = [], {}, []
    for i in range(tasks):
        iid = f"synth__pkg-{i}"
        cands, report = _instance(w, rng, iid, nodes_per_task, 2)
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
    (out / "config.resolved.yaml").write_text("strategy: mcts\nstep_limit: 40\nbudget_usd: 0.5\n")
    return out
