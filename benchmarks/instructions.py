"""The instruction set (agentflow/instruct/data/instructions.jsonl, prompts with 2-4 constraints each checked by
code): single answer vs decrim vs plangen, the same prompts for each, one model. Prints ONE JSON object:

    prompts, all_<method> (share of prompts whose every constraint holds), constraints_<method> (share of all
    constraints that hold), calls_<method> and tokens_<method> (per prompt), wall_s_<method>, model, seed

The checkers only grade: no workflow sees them (decrim's critic writes its own checks from the constraint text,
run in the sandbox). plangen's UCB statistics carry over from one prompt to the next.

Run: .venv/bin/python benchmarks/instructions.py [--limit N] [--seed S] [--model SPEC] [--methods ...]
[--sandbox docker|local] [--journal FILE] (default: every prompt, the embedded local:qwen2.5-coder-1.5b, Docker).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from functools import partial
from typing import Any

from _journal import Journal  # this folder is on sys.path when the script runs
from codegen import open_run_sandbox, run_one

from agentflow.graph import spec_from_dict
from agentflow.graph.define.loader import load_workflow
from agentflow.instruct.dataset import load_instructions
from agentflow.models.spec import load_model

METHODS = ("single", "decrim", "plangen")


async def answer(spec: Any, method: str, item: Any, ucb: dict[str, Any], model: Any, sb: Any) -> dict[str, Any]:
    """One method on one prompt, graded by the set's checkers (which the workflow never sees), with its cost."""
    start = time.monotonic()
    inputs: dict[str, Any] = {"prompt": item.prompt}
    if method == "plangen":
        inputs |= {"kind": "text", "ucb": ucb}
    state, budget = await run_one(spec, inputs, model, sb)
    graded = item.grade(state.get("response") or "")
    return {"all": graded["all"], "held": sum(c["ok"] for c in graded["checks"]), "checks": len(graded["checks"]),
            "failed": [c["kind"] for c in graded["checks"] if not c["ok"]], "calls": budget.used.model_calls,
            "tokens": budget.used.tokens, "error": state.get("error"), "algorithm": state.get("algorithm"),
            "wall_s": round(time.monotonic() - start, 1), "ucb": state.get("ucb") if method == "plangen" else None}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    items = load_instructions(args.limit, seed=args.seed)
    methods = [m for m in args.methods.split(",") if m]
    if any(m not in METHODS for m in methods):
        print(f"instructions.py: methods are {', '.join(METHODS)}", file=sys.stderr)
        raise SystemExit(2)
    specs = {"single": spec_from_dict({"name": "single", "state": {"prompt": {"type": "str"}, "response": {"type": "str"}},
                                       "nodes": {"respond": {"type": "instruct.respond", "next": "END"}}}),
             "decrim": load_workflow("decrim"), "plangen": load_workflow("plangen")}
    model = load_model(args.model)
    out: dict[str, Any] = {"prompts": len(items), "model": args.model, "seed": args.seed, "limit": args.limit}
    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    # the seed and limit only pick the prompts: a row of a seeded subset counts in the full run too
    journal = Journal(args.journal, {"model": args.model, "sandbox": args.sandbox})
    ucb: dict[str, Any] = {}
    try:
        async with open_run_sandbox(args.sandbox) as sb:
            for method in methods:
                for item in items:
                    row = await journal.measure(method, item.id,
                                                partial(answer, specs[method], method, item, ucb, model, sb))
                    ucb = row.get("ucb") or ucb
                    rows[method].append({k: v for k, v in row.items() if k not in ("settings", "ucb", "method")})
                r = rows[method]
                out[f"all_{method}"] = round(sum(x["all"] for x in r) / len(r), 4)
                out[f"constraints_{method}"] = round(sum(x["held"] for x in r) / sum(x["checks"] for x in r), 4)
                out[f"calls_{method}"] = round(sum(x["calls"] for x in r) / len(r), 2)
                out[f"tokens_{method}"] = round(sum(x["tokens"] for x in r) / len(r), 1)
                out[f"wall_s_{method}"] = round(sum(x["wall_s"] for x in r), 1)
    finally:
        await model.aclose()
    out["commits"] = journal.commits()
    out["per_prompt"] = rows
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="a fixed seeded subset of N prompts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="local:qwen2.5-coder-1.5b")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--sandbox", default="docker", choices=["docker", "local"])
    ap.add_argument("--journal", default=None, help="JSON lines of finished prompts: a rerun with it goes on where "
                                                     "it stopped")
    print(json.dumps(asyncio.run(main(ap.parse_args()))))
