"""Edit quality of a model with perfect localization: each example task's buggy function (from its gold patch)
is the window the coder rewrites (`edit_format: rewrite`, the embedded model's format), SAMPLES answers per
task in one `n` request, each graded with the task's hidden tests in a Docker sandbox. Prints ONE JSON object.

This separates the edit from localization and search: `pass_at_1` is the share of answers that resolve their
task, `coverage` the share of tasks with any resolving answer. The issue's reference point for the embedded
model (buggy function given, 4 samples): ~15% per sample, ~20% of bugs fixed by any of 4.

Run: .venv/bin/python benchmarks/repair_edit.py [--samples 4] [--filter REGEX] [-c key=value ...]
(`-c model=SPEC` picks the model, default the embedded local:qwen2.5-coder-1.5b; any repair config key works,
e.g. `-c file_context_lines=0` for the prompt without the rest of the file). Needs Docker and the sandbox image.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import difflib
import json
import re
import sys
import time
from pathlib import Path

from repair_resolve import count_resolving  # this folder is on sys.path when the script runs

from agentflow.models.base import ChatRequest
from agentflow.models.spec import load_model
from agentflow.repair.config import load_repair_config, run_values_for
from agentflow.repair.edit.steps import edit_prompt, issue_text, read_rewrite
from agentflow.repair.locate.localize import Window, clip_span, rank_windows, symbols
from agentflow.repair.nodetypes.rollout import SweEditSettings
from agentflow.swe import SWETask, load_tasks

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "examples" / "swe-tasks" / "tasks.jsonl"


def gold_window(task: SWETask, sources: dict[str, str], max_lines: int) -> Window:
    """The innermost function (else class) holding the gold patch's first changed line, cut to `max_lines`
    around it."""
    path, line, old = "", 0, -1
    for text in (task.patch or "").splitlines():
        if text.startswith("+++ b/"):
            path = text[6:]
        elif match := re.match(r"@@ -(\d+)", text):
            old = int(match.group(1)) - 1
        elif path and old >= 0 and text[:1] in " -+" and not text.startswith(("+++", "---")):
            if text[:1] in "-+":
                line = old + 1
                break
            old += 1
    spans = [(s.start, s.end, s.name) for s in symbols(path, sources[path]) if s.start <= line <= s.end]
    # a line outside functions (a class attribute) gets its class
    spans = spans or [(n.lineno, n.end_lineno or n.lineno, n.name) for n in ast.walk(ast.parse(sources[path]))
                      if isinstance(n, ast.ClassDef) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not spans:
        raise SystemExit(f"{task.instance_id}: the gold patch's line {path}:{line} is in no function or class")
    first, last, name = min(spans, key=lambda s: s[1] - s[0])
    start, end = clip_span(first, last, max_lines, focus=line)
    return Window(path, start, end, 0.0, name)


def diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"))


async def sample_task(model: object, cfg: SweEditSettings, task: SWETask, samples: int) -> dict[str, object]:
    repo = (TASKS.parent / task.repo).resolve()
    sources = {str(p.relative_to(repo)): p.read_text() for p in repo.rglob("*.py") if ".git" not in p.parts}
    target = gold_window(task, sources, cfg.window_lines)
    issue = issue_text(task.problem_statement, task.hints_text or "")
    others = [w for w in rank_windows(sources, issue, max_lines=cfg.window_lines, limit=cfg.windows)
              if (w.path, w.symbol) != (target.path, target.symbol)]
    prompt = edit_prompt(cfg, sources, issue, "", windows=[target, *others])
    request = ChatRequest(messages=prompt.messages, n=samples, temperature=cfg.temperature, seed=cfg.seed,
                          max_tokens=cfg.max_tokens, stop=list(cfg.stop))
    response = await model.chat(request)  # type: ignore[attr-defined]
    patches, statuses = [], []
    for choice in response.choices:
        read = read_rewrite(choice.message.content or "", sources, target)
        statuses.append(read.status)
        if read.status == "ok":
            patches.append("".join(diff(p, sources[p], new) for p, new in read.files.items()))
    return {"window": f"{target.path}:{target.start}-{target.end} {target.symbol}", "statuses": statuses,
            "patches": patches, "prompt_chars": sum(len(m.content or "") for m in prompt.messages)}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--filter", default="")
    parser.add_argument("-c", dest="config", action="append", default=[])
    args = parser.parse_args()
    cfg = load_repair_config(["edit.format=rewrite", *args.config])
    edit = SweEditSettings.model_validate(run_values_for(cfg, SweEditSettings.model_fields))  # as swe.edit gets them
    model = load_model(cfg.model, **cfg.model_options)
    tasks = [t for t in load_tasks(TASKS) if re.search(args.filter, t.instance_id)]
    start = time.perf_counter()
    results = {}
    for task in tasks:
        results[task.instance_id] = await sample_task(model, edit, task, args.samples)
        print(f"{task.instance_id}: {results[task.instance_id]['statuses']}", file=sys.stderr)
    sample_s = time.perf_counter() - start
    resolved = await count_resolving(tasks, {iid: r["patches"] for iid, r in results.items()})  # type: ignore[misc]
    answers = len(tasks) * args.samples
    statuses = [s for r in results.values() for s in r["statuses"]]  # type: ignore[attr-defined]
    print(json.dumps({
        "model": cfg.model, "samples_per_task": args.samples, "tasks": len(tasks), "config": args.config,
        "pass_at_1": round(sum(resolved.values()) / answers, 3) if answers else 0.0,
        "coverage": round(sum(1 for v in resolved.values() if v) / len(tasks), 3) if tasks else 0.0,
        "resolved_answers": sum(resolved.values()), "answers": answers,
        "statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
        "per_task": {iid: f"{resolved[iid]}/{args.samples}" for iid in results},
        "sampling_s": round(sample_s, 1),
    }))


if __name__ == "__main__":
    asyncio.run(main())
