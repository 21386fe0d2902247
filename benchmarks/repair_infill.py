"""Edit quality of fill-in-the-middle with perfect line localization (a probe for a hypothesis, not a repair step).

The code model writes the lines of a hole it is not shown: each task's gold patch's first changed run of lines
(the lines it removes, or the place it inserts at) is cut out of its file and the model fills it, given the
issue as a file of the repository and the code around the hole, in the model's own fill-in-the-middle format
(Qwen2.5-Coder's repo-level format: `<|repo_name|>`, `<|file_sep|>`, `<|fim_prefix|>`, `<|fim_suffix|>`,
`<|fim_middle|>`, sent as a raw request: `ChatRequest.raw`, the text alone to `/v1/completions`, which
llama-server and vLLM both serve). An answer that fills the hole with what was there is a noop; one that does
not parse is an apply error; the others are graded with the task's hidden tests in Docker, as `repair_edit.py`
grades the rewrite (`--grade`, the same figures: pass_at_1, coverage, noop_share, per package and statement
kind).

With `--holes gold` (the default) it measures an upper bound for an infill edit: the hole is exactly where the
gold patch changes the code, which the repair does not know (how often its line evidence finds that line:
`docs/measurements/line-marks.md`). Compare with `repair_edit.py`'s rewrite of the gold function (perfect
function localization), not with the repair. With `--holes statements` every statement of the function holding
the gold lines is a hole of its own (the function given, not the line): the JSON's `fills_by_hole` says how
often a fill changes its hole on the gold lines and elsewhere, i.e. whether the fills point at the bug.

Run: .venv/bin/python benchmarks/repair_infill.py [--tasks FILE] [--limit N --seed S] [--samples 4]
[--holes gold|statements] [--filter REGEX] [--reader suffix|block] [--answers FILE [--sample-only]]
(grade later: benchmarks/repair_edit.py --grade FILE); `--reread ANSWERS [--reader R] [--answers NEW]` reads a
kept answers file's fills again (no model) and grades them. Starts the embedded model's llama-server
(local:qwen2.5-coder-1.5b) for the run.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# this folder is on sys.path when the script runs
from localize_real import gold_lines
from repair_edit import (
    TASKS,
    diff,
    first_hole,
    grade_run,
    read_answers,
    recorded,
    tasks_file_of,
    write_answers,
)
from repair_resolve import seeded_subset

from agentflow.models import ChatModel, load_model
from agentflow.models.ask import ask
from agentflow.models.fim import FIM_FORMATS
from agentflow.repair.edit.infill import PREFIX_LINES, SUFFIX_LINES, cut_at_block_end, cut_at_suffix
from agentflow.repair.edit.steps import issue_text
from agentflow.repair.locate.statement import read_statement
from agentflow.swe import SWETask, load_tasks

MODEL = "qwen2.5-coder-1.5b"
FIM = FIM_FORMATS["qwen2.5-coder"]


@dataclass
class Hole:
    """Lines cut out of a file for the model to fill."""

    path: str
    start: int
    removed: list[str]
    text: str
    """The whole file as it is at the base commit."""
    before: list[str]
    after: list[str]
    on_gold: bool = True
    """Whether the gold patch changes these lines (or inserts beside them)."""

    @property
    def indent(self) -> int:
        """The indentation of the hole's first line (an insertion's: that of the line it goes before)."""
        first = next((line for line in [*self.removed, *self.after] if line.strip()), "")
        return len(first) - len(first.lstrip())

    @property
    def lines(self) -> str:
        return f"{self.start}-{self.start + max(len(self.removed), 1) - 1}"


def cut(path: str, text: str, start: int, end: int, on_gold: bool = True) -> Hole:
    """Lines start..end (1-based, inclusive; end = start - 1 for an insertion's place) of a file as a hole."""
    lines = text.splitlines(keepends=True)
    return Hole(path, start, [line.rstrip("\n") for line in lines[start - 1:end]], text, lines[:start - 1],
                lines[end:], on_gold)


def statement_spans(text: str, line: int) -> list[tuple[int, int]]:
    """The signature and every statement of the innermost function holding `line`, as the lines each alone
    occupies: a simple statement whole, a compound one's header (`if ...:`, `for ...:`), in file order; no
    docstring."""
    functions = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                 and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not functions:
        return []
    function = min(functions, key=lambda n: (n.end_lineno or n.lineno) - n.lineno)
    spans = [(function.lineno, max(function.body[0].lineno - 1, function.lineno))]  # the signature
    for node in ast.walk(function):
        if node is function or not isinstance(node, ast.stmt) or isinstance(node, ast.FunctionDef | ast.ClassDef):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue  # a docstring
        body = getattr(node, "body", None)
        end = body[0].lineno - 1 if isinstance(body, list) and body else (node.end_lineno or node.lineno)
        spans.append((node.lineno, max(end, node.lineno)))
    return sorted(set(spans))


def holes_of(task: SWETask, repo: Path, mode: str) -> list[Hole]:
    """`gold`: the gold patch's first run of changed lines, one hole (an upper bound). `statements`: each
    statement of the function holding that run, a hole each (the function given, the lines not: the fills
    that change their hole say where the model sees the bug)."""
    path, start, removed = first_hole(task.patch or "")
    text = (repo / path).read_text()
    gold = cut(path, text, start, start + len(removed) - 1)
    if mode == "gold":
        return [gold]
    changed = gold_lines(task.patch or "").get(path, set())  # an insertion's: the lines either side of it
    return [cut(path, text, a, b, on_gold=any(a <= line <= b for line in changed))
            for a, b in statement_spans(text, start)] or [gold]


def read_fill(raw: str, hole: Hole, reader: str) -> tuple[str, str]:
    """(status, patch) of a model's fill: `noop` when it puts back the old lines, `apply_error` when the file
    does not parse with it, else `ok` with the patch. Reader `suffix` cuts the fill where it repeats the code
    after the hole; `block` also where it leaves the hole's block (`cut_at_block_end`)."""
    middle = cut_at_suffix(raw, hole.after)
    if reader == "block":
        middle = cut_at_block_end(middle, hole.indent)
    middle += "" if not middle or middle.endswith("\n") else "\n"
    if [s.strip() for s in middle.splitlines() if s.strip()] == [s.strip() for s in hole.removed if s.strip()]:
        return "noop", ""
    new = "".join(hole.before) + middle + "".join(hole.after)
    try:
        ast.parse(new)
    except SyntaxError:
        return "apply_error", ""
    return "ok", diff(hole.path, hole.text, new)


def fim_prompt(task: SWETask, hole: Hole) -> str:
    issue = issue_text(task.problem_statement, task.hints_text or "")
    return FIM.prompt(hole.path, "".join(hole.before[-PREFIX_LINES:]), "".join(hole.after[:SUFFIX_LINES]),
                      repo=task.instance_id.split("__")[0], files=[("ISSUE.md", issue.strip())])


def task_result(task: SWETask, fills: list[tuple[Hole, str]], reader: str, prompt_chars: int) -> dict[str, Any]:
    """A task's row of the answers file: each (hole, fill) read (`read_fill`), the raw fill kept for a re-read."""
    read = [(hole, raw, *read_fill(raw, hole, reader)) for hole, raw in fills]
    holes = list(dict.fromkeys(hole.lines for hole, _ in fills))
    return {"window": f"{fills[0][0].path}:{','.join(holes)} (holes)", "statuses": [st for _, _, st, _ in read],
            "patches": [patch for _, _, st, patch in read if st == "ok"], "prompt_chars": prompt_chars,
            "answers": [{"hole": hole.lines, "on_gold": hole.on_gold, "status": st, "text": raw}
                        for hole, raw, st, _ in read],
            "kind": read_statement(task.problem_statement).kind}


async def sample_task(model: ChatModel, task: SWETask, repo: Path, args: argparse.Namespace) -> dict[str, Any]:
    """`--samples` fills of each of the task's holes (seeds 0..samples-1), read as patches."""
    fills, chars = [], 0
    for hole in holes_of(task, repo, args.holes):
        prompt = fim_prompt(task, hole)
        chars = max(chars, len(prompt))
        for seed in range(args.samples):  # one sample a call, seeded as before; the server reuses the prompt's cache
            answer = await ask(model, prompt, raw=True, temperature=0.8, seed=seed, max_tokens=200, stop=FIM.stop)
            fills.append((hole, answer.text))
    return task_result(task, fills, args.reader, chars)


def reread(path: str, reader: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A kept answers file's fills read again with `reader`, without a model."""
    run, results = read_answers(path)
    tasks_file = tasks_file_of(run)
    tasks = {t.instance_id: t for t in load_tasks(tasks_file)}
    for iid, row in results.items():
        task = tasks[iid]
        holes = {hole.lines: hole for hole in holes_of(task, (tasks_file.parent / task.repo).resolve(),
                                                        run.get("holes", "gold"))}
        first = next(iter(holes.values()))
        fills = [(holes.get(answer.get("hole", first.lines), first), answer["text"]) for answer in row["answers"]]
        results[iid] = task_result(task, fills, reader, row["prompt_chars"])
    return run | {"reader": reader}, results


def hole_figures(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """How often a fill changes its hole, on the gold lines and elsewhere: with `--holes statements`, whether
    the fills that change a hole point at the bug."""
    answers = [a for row in results.values() for a in row["answers"]]
    return {where: {"fills": len(group), "changed": sum(a["status"] != "noop" for a in group)}
            for where, group in (("on_gold", [a for a in answers if a.get("on_gold", True)]),
                                 ("elsewhere", [a for a in answers if not a.get("on_gold", True)]))}


async def sample_run(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    tasks_file = Path(args.tasks).resolve()
    tasks = [t for t in load_tasks(tasks_file) if re.search(args.filter, t.instance_id)]
    subset = seeded_subset([t.instance_id for t in tasks], args.limit, args.seed)
    tasks = [t for t in tasks if not subset or t.instance_id in subset]
    run: dict[str, Any] = {"model": f"local:{MODEL}", "edit_format": "infill", "holes": args.holes,
                           "tasks_file": recorded(tasks_file), "subset": subset or "all",
                           "samples_per_task": args.samples,
                           "config": [], "reader": args.reader, "sampling_s": 0.0, "date": time.strftime("%Y-%m-%d")}
    results: dict[str, dict[str, Any]] = {}
    start = time.perf_counter()
    model = load_model(f"local:{MODEL}", parallel=1, ctx=16384)
    try:
        for task in tasks:
            repo = (tasks_file.parent / task.repo).resolve()
            results[task.instance_id] = await sample_task(model, task, repo, args)
            print(f"{task.instance_id}: {results[task.instance_id]['statuses']}", file=sys.stderr)
            run["sampling_s"] = round(time.perf_counter() - start, 1)
            if args.answers:
                write_answers(args.answers, run, results)
    finally:
        await model.aclose()
    return run, results


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default=str(TASKS), help="tasks file (default: the 15 example tasks)")
    ap.add_argument("--limit", type=int, default=None, help="a fixed seeded subset of N tasks")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--filter", default="")
    ap.add_argument("--answers", default=None, help="also write each task's prompt size, answers and patches here")
    ap.add_argument("--sample-only", action="store_true", help="stop after the model's part (grade with --grade)")
    ap.add_argument("--holes", choices=["gold", "statements"], default="gold",
                    help="the gold patch's lines (gold), or each statement of the function holding them (statements)")
    ap.add_argument("--reader", choices=["suffix", "block"], default="suffix",
                    help="where a fill ends: where it repeats the code after the hole (suffix), or also where it "
                         "leaves the hole's block (block)")
    ap.add_argument("--reread", default=None, metavar="ANSWERS",
                    help="read a kept answers file's fills again with --reader (no model), then as after sampling")
    args = ap.parse_args()
    for given, what in ((args.reread, "--reread"), (None if args.reread else args.tasks, "--tasks")):
        if given and not Path(given).is_file():
            ap.error(f"{what} {given}: no such file")
    if args.reread:
        run, results = reread(args.reread, args.reader)
        if args.answers:
            write_answers(args.answers, run, results)
    else:
        run, results = await sample_run(args)
    if not args.sample_only:
        print(json.dumps(await grade_run(run, results) | {"fills_by_hole": hole_figures(results)}))


if __name__ == "__main__":
    asyncio.run(main())
