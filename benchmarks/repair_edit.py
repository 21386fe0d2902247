"""Edit quality of a model with perfect localization: each task's buggy function (from its gold patch) is the
window the coder edits, in the run's edit format (`edit.format`; `auto` as the repair resolves it for the model:
`rewrite` for the embedded model), SAMPLES answers per task in one `n` request, each graded with the task's
hidden tests in a Docker sandbox. Prints ONE JSON object.

This separates the edit from localization and search: `pass_at_1` is the share of answers that resolve their
task, `coverage` the share of tasks with any resolving answer, `statuses` the outcome mix of the answers (ok: a
usable edit; noop: the answer changes nothing; apply_error: it cannot be applied or does not parse; unparsable:
no code in it) with `noop_share` (noop answers / answers). `by_package` (the instance id's owner) and
`by_statement` (`locate.statement.read_statement`'s kind: `failing_tests` for a failing-test report,
`examples` for a report with `>>>` examples, `prose`) give the same figures per group.

The prompt is built as the repair's first edit builds it (`steps.edit_prompt` with `steps.issue_text`): a
failing-test report's failure is shown as the tests' results too (`first_feedback`), as the repair shows its
run of those tests at the base commit. The issue's reference point for the embedded model (buggy function given,
4 samples): ~15% per sample, ~20% of bugs fixed by any of 4.

Run: .venv/bin/python benchmarks/repair_edit.py [--tasks FILE] [--limit N --seed S] [--samples 4]
[--format rewrite|search_replace] [--filter REGEX] [--answers FILE [--sample-only]] [--grade ANSWERS]
[--out FILE] [-c key=value ...]
(`--tasks` defaults to the 15 example tasks; the wide set is `examples/wide-tasks/tasks.jsonl`, its repositories
built first by examples/wide-tasks/build.py; `--answers` writes the run's settings and each task's prompt,
answers and patches as JSON lines, `--sample-only` stops there (the model's part) and `--grade ANSWERS` grades
such a file later (the Docker part); `-c model=SPEC` picks the model, default the embedded
local:qwen2.5-coder-1.5b; any repair config key works, e.g. `-c file_context_lines=0` for the prompt without
the rest of the file). Needs Docker and the sandbox image to grade.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

# this folder is on sys.path when the script runs
from repair_resolve import count_resolving, package_of, seeded_subset

from agentflow.models.ask import ask_request
from agentflow.models.base import ChatModel
from agentflow.models.spec import load_model
from agentflow.repair.config import ALL_NODES, RepairConfig, load_repair_config, run_values_for
from agentflow.repair.edit.steps import edit_format_for, edit_prompt, issue_text, read_answer
from agentflow.repair.locate.localize import Window, clip_span, function_window, rank_windows, symbols
from agentflow.repair.locate.statement import read_statement
from agentflow.repair.nodetypes.rollout import SweEditSettings
from agentflow.repair.verify.workbench import failures_first
from agentflow.swe import SWETask, load_tasks

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "examples" / "swe-tasks" / "tasks.jsonl"
EDIT_NODE = "edit"
"""The swe.edit node of the shipped workflow (`workflows/repair.yaml`): `-c nodes.edit.<key>` reaches it."""


def gold_window(task: SWETask, sources: dict[str, str], max_lines: int) -> Window:
    """The innermost function (else class) holding the gold patch's first changed line, as the repair's
    localization shows a function (`localize.function_window`: a long one cut to `max_lines` of whole
    statements around that line, never mid-statement or inside its docstring)."""
    path, line, _ = first_hole(task.patch or "")
    found = [s for s in symbols(path, sources[path]) if s.start <= line <= s.end]
    if found:
        sym = min(found, key=lambda s: s.end - s.start)
        start, end = function_window(sym, max_lines, line)
        return Window(path, start, end, 0.0, sym.qualname)
    # a line outside functions (a class attribute) gets its class
    spans = [(n.lineno, n.end_lineno or n.lineno, n.name) for n in ast.walk(ast.parse(sources[path]))
             if isinstance(n, ast.ClassDef) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not spans:
        raise SystemExit(f"{task.instance_id}: the gold patch's line {path}:{line} is in no function or class")
    first, last, name = min(spans, key=lambda s: s[1] - s[0])
    start, end = clip_span(first, last, max_lines, focus=line)
    return Window(path, start, end, 0.0, name)


def first_hole(patch: str) -> tuple[str, int, list[str]]:
    """(path, first line, the old lines) of a patch's first run of changed lines in the old file; an insertion's
    old lines are [] and its first line the one it goes before."""
    path, old, start, removed = "", 0, 0, []
    for text in patch.splitlines():
        if text.startswith("+++ b/"):
            path = text[6:]
        elif match := re.match(r"@@ -(\d+)", text):
            old = int(match.group(1))
        elif old and text[:1] in "-+" and not text.startswith(("---", "+++")):
            start = start or old
            if text[:1] == "-":
                removed.append(text[1:])
                old += 1
        elif old and text[:1] == " ":
            if start:
                break
            old += 1
    return path, start, removed


def diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"))


def edit_settings(cfg: RepairConfig, model: ChatModel) -> SweEditSettings:
    """The swe.edit node's settings as a run gives them (`workflow_settings.give_settings`): the run's values,
    then `nodes.*`, then the edit node's own; `edit_format: auto` resolved for the model (`edit_format_for`)."""
    fields = SweEditSettings.model_fields
    values = run_values_for(cfg, fields)
    for node in (ALL_NODES, EDIT_NODE):
        values |= {key: value for key, value in cfg.nodes.get(node, {}).items() if key in fields}
    settings = SweEditSettings.model_validate(values)
    if settings.edit_format == "auto":
        settings = settings.model_copy(update={"edit_format": edit_format_for(cfg, model)})
    return settings


def first_feedback(problem_statement: str) -> str:
    """The tests' results the repair's first edit is shown, as far as the probe can tell without running them.
    For a failing-test report the repair runs the report's tests at the base commit, keeps them as the
    reproduction and leads the feedback with their summarised failure (`workbench.failures_first`); the probe
    takes the report's own copy of that output (`Statement.failure`: pytest's `E` lines and locations). For
    other statements the repair shows its run of the repository's suite at the base commit, which the probe
    does not run: nothing."""
    statement = read_statement(problem_statement)
    if statement.kind != "failing_tests" or not statement.failure.strip():
        return ""
    return failures_first(statement.failure, "")


async def sample_task(model: ChatModel, cfg: SweEditSettings, task: SWETask, repo: Path,
                      samples: int) -> dict[str, Any]:
    """`samples` answers to the edit prompt of the task's gold function, read as the repair reads them."""
    sources = {str(p.relative_to(repo)): p.read_text() for p in repo.rglob("*.py") if ".git" not in p.parts}
    target = gold_window(task, sources, cfg.window_lines)
    issue = issue_text(task.problem_statement, task.hints_text or "")
    others = [w for w in rank_windows(sources, issue, max_lines=cfg.window_lines, limit=cfg.windows)
              if (w.path, w.symbol) != (target.path, target.symbol)]
    prompt = edit_prompt(cfg, sources, issue, first_feedback(task.problem_statement), windows=[target, *others])
    # the request the repair's `ask` sends, with `n` samples (the repair batches a prompt's samples so too)
    request = ask_request(prompt.user, system=prompt.system, temperature=cfg.temperature, seed=cfg.seed,
                          max_tokens=prompt.max_tokens(cfg.max_tokens), stop=cfg.stop).model_copy(update={"n": samples})
    response = await model.chat(request)
    patches, statuses, answers = [], [], []
    for choice in response.choices:
        text = choice.message.content or ""
        read = read_answer(text, choice.finish_reason, prompt, sources)
        statuses.append(read.status)
        answers.append({"status": read.status, "errors": read.errors[:3], "text": text})
        if read.status == "ok":
            patches.append("".join(diff(p, sources[p], new) for p, new in read.files.items()))
    return {"window": f"{target.path}:{target.start}-{target.end} {target.symbol}", "statuses": statuses,
            "patches": patches, "prompt_chars": len(prompt.system) + len(prompt.user),
            "prompt": {"system": prompt.system, "user": prompt.user}, "answers": answers}


def figures(statuses: list[str], resolved: int, covered: int, tasks: int) -> dict[str, Any]:
    """pass@1, coverage and the outcome mix of a group of answers."""
    answers = len(statuses)
    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    return {"tasks": tasks, "answers": answers, "resolved_answers": resolved,
            "pass_at_1": round(resolved / answers, 3) if answers else 0.0,
            "coverage": round(covered / tasks, 3) if tasks else 0.0,
            "statuses": counts, "noop_share": round(counts.get("noop", 0) / answers, 3) if answers else 0.0}


def grouped(results: dict[str, dict[str, Any]], resolved: dict[str, int],
            group_of: Callable[[str], str]) -> dict[str, dict[str, Any]]:
    """`figures` per group of tasks (`group_of` an instance id)."""
    groups: dict[str, list[str]] = {}
    for iid in results:
        groups.setdefault(group_of(iid), []).append(iid)
    return {name: figures([s for iid in ids for s in results[iid]["statuses"]],
                          sum(resolved[iid] for iid in ids), sum(1 for iid in ids if resolved[iid]), len(ids))
            for name, ids in sorted(groups.items())}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", default=str(TASKS), help="tasks file (default: the 15 example tasks)")
    parser.add_argument("--limit", type=int, default=None,
                        help="a fixed subset of N tasks, drawn with --seed (spread over the packages, unlike a slice)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --limit subset")
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--format", choices=["rewrite", "search_replace"], default=None,
                        help="the edit format (same as -c edit.format=...; default: the run's, auto resolved)")
    parser.add_argument("--filter", default="")
    parser.add_argument("--answers", default=None,
                        help="write the run's settings and each task's prompt, answers and patches here (JSON lines)")
    parser.add_argument("--sample-only", action="store_true",
                        help="stop once the answers are written (--answers): the model's part alone")
    parser.add_argument("--grade", default=None, metavar="ANSWERS",
                        help="grade the answers file of an earlier --sample-only run (no model call)")
    parser.add_argument("--out", default=None, help="also write the JSON result to this file")
    parser.add_argument("-c", dest="config", action="append", default=[])
    return parser.parse_args()


async def sample_run(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The model's part: every task's answers, with the run's settings ({settings}, {instance id: answers});
    written to `--answers` after each task (a run cut short keeps the tasks it finished)."""
    overrides = [*args.config, *([f"edit.format={args.format}"] if args.format else [])]
    cfg = load_repair_config(overrides)
    model = load_model(cfg.model, **cfg.model_options)
    edit = edit_settings(cfg, model)
    tasks_file = Path(args.tasks).resolve()
    tasks = [t for t in load_tasks(tasks_file) if re.search(args.filter, t.instance_id)]
    subset = seeded_subset([t.instance_id for t in tasks], args.limit, args.seed)
    tasks = [t for t in tasks if not subset or t.instance_id in subset]
    start = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    run: dict[str, Any] = {"model": cfg.model, "edit_format": edit.edit_format, "tasks_file": recorded(tasks_file),
                           "subset": subset or "all", "samples_per_task": args.samples, "config": overrides,
                           "sampling_s": 0.0, "date": time.strftime("%Y-%m-%d")}
    for task in tasks:
        repo = (tasks_file.parent / task.repo).resolve()
        results[task.instance_id] = await sample_task(model, edit, task, repo, args.samples)
        results[task.instance_id]["kind"] = read_statement(task.problem_statement).kind
        print(f"{task.instance_id}: {results[task.instance_id]['statuses']}", file=sys.stderr)
        run["sampling_s"] = round(time.perf_counter() - start, 1)
        if args.answers:
            write_answers(args.answers, run, results)
    return run, results


def recorded(tasks_file: Path) -> str:
    """A tasks file as an answers file records it: relative to the checkout when inside it, so a kept answers
    file grades in another clone (`tasks_file_of`)."""
    return str(tasks_file.relative_to(ROOT)) if tasks_file.is_relative_to(ROOT) else str(tasks_file)


def tasks_file_of(run: dict[str, Any]) -> Path:
    """The tasks file an answers file's run used (`recorded`)."""
    return (ROOT / run["tasks_file"]).resolve()


def write_answers(path: str, run: dict[str, Any], results: dict[str, dict[str, Any]]) -> None:
    """A sampling run as JSON lines: its settings, then each task's prompt, answers and patches."""
    rows = [run, *({"instance_id": iid, **r} for iid, r in results.items())]
    Path(path).write_text("".join(json.dumps(row) + "\n" for row in rows))


def read_answers(path: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A sampling run `write_answers` wrote."""
    run, *rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return run, {row.pop("instance_id"): row for row in rows}


async def grade_run(run: dict[str, Any], results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The hidden tests' part: each answer's patch graded; the figures, overall, per package and per kind."""
    tasks = [t for t in load_tasks(tasks_file_of(run)) if t.instance_id in results]
    resolved = await count_resolving(tasks, {iid: r["patches"] for iid, r in results.items()})
    statuses = [s for r in results.values() for s in r["statuses"]]
    samples = run["samples_per_task"]
    return {
        **{k: v for k, v in run.items() if k != "sampling_s"},
        **figures(statuses, sum(resolved.values()), sum(1 for v in resolved.values() if v), len(results)),
        "by_package": grouped(results, resolved, package_of),
        "by_statement": grouped(results, resolved, lambda iid: results[iid]["kind"]),
        "per_task": {iid: {"resolved": f"{resolved[iid]}/{samples}", "statuses": r["statuses"],
                           "window": r["window"], "prompt_chars": r["prompt_chars"]} for iid, r in results.items()},
        "sampling_s": run["sampling_s"],
    }


async def main() -> None:
    args = parse_args()
    if args.grade:
        run, results = read_answers(args.grade)
    else:
        run, results = await sample_run(args)
        if args.sample_only:
            return
    result = await grade_run(run, results)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
