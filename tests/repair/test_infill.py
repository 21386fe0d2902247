"""Edits as fill-in-the-middle (`repair.edit.infill`, the `infill` step of `noop_escalation`): the holes a
window's statements make, how a fill is read, the formats of code-model families, and a repair whose rewrites
come back unchanged going on by filling the window's statements."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.models.base import ChatRequest
from agentflow.models.fim import FIM_FORMATS, fim_format
from agentflow.repair.edit.infill import Hole, fill_prompt, read_fill, statement_holes

from .conftest import ROOT, TASKS_FILE, read_jsonl, short
from .test_branch_diversity import SNIPPET

CODE = '''\
import re


class Config:
    """Settings."""

    def get(self, key, default=None):
        """A value."""
        value = self.values.get(key)
        if value is None and (
                default is not None):
            return default
        for part in key.split("."):
            value = value[part]
        return value.strip()


def parse(text):
    lines = [line for line in text.splitlines()
             if line.strip()]
    return dict(line.split("=", 1) for line in lines)
'''


def _own_lines(lines: list[str]) -> str:
    return "".join(lines)


@pytest.mark.parametrize("start,end", [(1, 21), (7, 15), (18, 21)])
def test_each_statement_of_a_window_is_a_hole_of_its_own_lines(start: int, end: int) -> None:
    """Generated over every statement in the window: a simple statement's hole is all of it, a compound one's
    its header (the lines up to its body), docstrings are none; the holes do not overlap and lie in the
    window; filling a hole with its own lines is a noop, with other code a new file that parses."""
    holes = statement_holes("m.py", CODE, start, end)
    tree = ast.parse(CODE)
    expected = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            continue
        body = getattr(node, "body", None)
        last = body[0].lineno - 1 if body else node.end_lineno
        if start <= node.lineno and last <= end:
            expected.add((node.lineno, last))
    assert {(h.start, h.end) for h in holes} == expected and len(holes) == len(expected)
    covered = [line for h in holes for line in range(h.start, h.end + 1)]
    assert len(covered) == len(set(covered))
    for hole in holes:
        assert _own_lines(hole.before) + _own_lines(hole.removed) + _own_lines(hole.after) == CODE
        assert read_fill(_own_lines(hole.removed), hole).status == "noop"
        indent = " " * hole.indent
        changed = read_fill(f"{indent}pass\n" if not hole.removed[0].rstrip().endswith(":") else "", hole)
        if hole.removed[-1].rstrip().endswith(":"):
            assert changed.status == "apply_error"  # a header left empty: the file does not parse
        else:
            assert changed.status == "ok", hole
            assert ast.parse(changed.files["m.py"]) and f"{indent}pass\n" in changed.files["m.py"]


def test_marked_lines_come_first_and_definition_lines_last() -> None:
    holes = statement_holes("m.py", CODE, 7, 15, marks=(13, 14))
    assert [(h.start, h.end) for h in holes][:2] == [(13, 13), (14, 14)]
    assert (holes[-1].start, holes[-1].end) == (7, 7)  # the `def` line
    assert statement_holes("m.py", "def broken(:\n", 1, 1) == []


def test_a_fill_is_cut_where_it_repeats_the_code_after_it_or_leaves_its_block() -> None:
    hole = next(h for h in statement_holes("m.py", CODE, 18, 21) if h.start == 19)
    runs_on = '    lines = [x for x in text.splitlines()\n             if x.strip()]\n' + "".join(hole.after)
    read = read_fill(runs_on, hole)
    assert read.status == "ok" and read.files["m.py"].count("return dict(") == 1
    leaves = "    lines = text.splitlines()\n\n\ndef other():\n    pass\n```\nSome prose."
    read = read_fill(leaves, hole)
    assert read.status == "ok" and "def other" not in read.files["m.py"]
    assert read_fill("    lines = (\n", hole).status == "apply_error"
    assert read_fill("\n", hole).status == "apply_error"


def test_formats_of_code_model_families() -> None:
    assert fim_format("local:qwen2.5-coder-1.5b") is FIM_FORMATS["qwen2.5-coder"]
    assert fim_format("llamacpp:/models/Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf") is FIM_FORMATS["qwen2.5-coder"]
    assert fim_format("vllm:bigcode/starcoder2-3b") is FIM_FORMATS["starcoder2"]
    assert fim_format("openai:gpt-4o-mini") is None and fim_format("local:gemma3-270m") is None
    hole = Hole("pkg/m.py", 2, 2, "a = 1\nb = 2\nc = 3\n")
    prompt = fill_prompt(FIM_FORMATS["qwen2.5-coder"], hole, "It fails.", "pkg")
    assert prompt == ("<|repo_name|>pkg\n<|file_sep|>ISSUE.md\nIt fails.\n<|file_sep|>pkg/m.py\n"
                      "<|fim_prefix|>a = 1\n<|fim_suffix|>c = 3\n<|fim_middle|>")


TASK = "tabkit__tabkit-2"
REPO = ROOT / "examples" / "swe-tasks" / "repos" / "tabkit"
GOLD = next(json.loads(line)["patch"] for line in TASKS_FILE.read_text().splitlines()
            if json.loads(line)["instance_id"] == TASK)
OLD, NEW = (next(line[1:] for line in GOLD.splitlines() if line.startswith(sign) and not line.startswith(sign * 3))
            for sign in "-+")
FIM = re.compile(r"<\|file_sep\|>(\S+)\n<\|fim_prefix\|>(.*)<\|fim_suffix\|>(.*)<\|fim_middle\|>$", re.DOTALL)


def unchanged_rewrite(prompt: str) -> str:
    """A rewrite prompt's window given back as it was."""
    snippet = SNIPPET.search(prompt)
    assert snippet, "a rewrite prompt"
    return f"```python\n{snippet.group(1)}\n```"


def fills_only_the_bug(request: ChatRequest) -> str:
    """Rewrites come back unchanged; a fill puts its statement back, but for the bug's, which it fixes."""
    prompt = request.messages[-1].content or ""
    if not request.raw:
        return unchanged_rewrite(prompt)
    match = FIM.search(prompt)
    assert match and "<|file_sep|>ISSUE.md\n" in prompt, prompt
    path, before, after = match.groups()
    text = (REPO / path).read_text()
    assert text.startswith(before)
    removed = text[len(before):len(text) - len(after)]
    assert text.endswith(after)
    return removed.replace(OLD, NEW)


def test_branches_whose_rewrites_come_back_unchanged_fill_the_statements_until_one_changes(tmp_path: Path) -> None:
    """`noop_escalation=[infill,suspect]`, four concurrent branches (four first suspects): each rewrite comes back
    unchanged; each branch's next tries are raw prompts in the coder's fill-in-the-middle format, one statement
    of its window each, none filled twice; a fill that puts its statement back is a noop and the next fills the
    next statement (the window's `def` line last), another window only once all are filled; the fill of the
    bug's statement is a candidate and resolves the task."""
    out = tmp_path / "run"
    run(["repair", "--tasks", str(TASKS_FILE), "-i", TASK, "--sandbox", "local", "-o", str(out),
         "--model", "function:tests.repair.test_infill:fills_only_the_bug", "-c", "rank=false",
         "-c", "reproduce=false", "-c", "sampling.batch_samples=1",
         "-c", "search.max_attempts=1", "-c", "trace.content=true", "-c", "edit.format=rewrite",
         "--strategy", "best_of_n", "-n", "4", "-c", "search.concurrency=4",
         "-c", "noop_escalation=[infill,suspect]", "-c", "infill_format=qwen2.5-coder", "-c", "noop_retries=20"])
    cands = read_jsonl(out / "instances" / TASK / "candidates.jsonl")
    by_branch: dict[str, list[dict[str, object]]] = {}
    for cand in cands:
        by_branch.setdefault(str(short(cand["candidate_id"])).split(".")[0], []).append(cand)
    assert len(by_branch) == 4
    for tries in by_branch.values():
        assert (tries[0]["status"], tries[0]["approach"], tries[0]["edit_errors"]) == (
            "noop", [], ["the code came back unchanged"])
        fills = tries[1:]
        assert fills and all(c["approach"] == ["infill"] * 1 + ["suspect"] * (len(c["approach"]) - 1)
                             for c in fills)
        assert all(c["status"] == "noop" for c in fills[:-1])
        holes = [c["edit_errors"][0] for c in fills[:-1]]
        assert len(set(holes)) == len(holes)  # no statement filled twice
        first_window = [c for c in fills if c["window"] == tries[0]["window"]]
        assert first_window == fills[:len(first_window)]  # the window's statements before another window's
    fixed = [c for c in cands if c["status"] == "ok"]
    removed = [line for line in fixed[0]["patch"].splitlines() if line.startswith("-") and not line.startswith("---")]
    assert len(fixed) == 1 and removed == [f"-{OLD}"] and f"\n+{NEW}\n" in fixed[0]["patch"]
    events = read_jsonl(out / "events.jsonl")
    raw = [e["data"]["messages"][-1]["content"] for e in events if e["kind"] == "model.call"
           and "<|fim_middle|>" in e["data"]["messages"][-1]["content"]]
    assert len(raw) == len(cands) - 4
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == [TASK]


FILLED: list[int] = []


def fills_with_pass(request: ChatRequest) -> str:
    """Rewrites come back unchanged; a fill is `pass` (a change the tests may or may not mind), its line kept."""
    prompt = request.messages[-1].content or ""
    if not request.raw:
        return unchanged_rewrite(prompt)
    match = FIM.search(prompt)
    assert match
    before = match.group(2)
    FILLED.append(before.count("\n") + 1)
    indent = len(match.group(3)) - len(match.group(3).lstrip(" ")) if match.group(3).strip() else 4
    return " " * max(indent, 4) + "pass\n"


def test_a_chain_fills_other_statements_in_its_later_draws(tmp_path: Path) -> None:
    """One chain of three attempts on one window: every draw's rewrite comes back unchanged, then fills follow
    until one is an edit; a later draw fills statements no earlier draw of the chain filled."""
    FILLED.clear()
    out = tmp_path / "run"
    run(["repair", "--tasks", str(TASKS_FILE), "-i", TASK, "--sandbox", "local", "-o", str(out),
         "--model", "function:tests.repair.test_infill:fills_with_pass", "-c", "rank=false",
         "-c", "reproduce=false", "-c", "sampling.batch_samples=1", "-c", "search.max_attempts=3",
         "-c", "trace.content=true", "-c", "edit.format=rewrite", "-c", "search.concurrency=1",
         "-c", "noop_escalation=[infill,suspect]", "-c", "infill_format=qwen2.5-coder", "-c", "noop_retries=3",
         "-c", "split_edits=false", "-c", "windows=1"])
    cands = read_jsonl(out / "instances" / TASK / "candidates.jsonl")
    fills = [c for c in cands if c["approach"][:1] == ["infill"]]
    assert len(fills) == len(FILLED) and len({c["window"] for c in cands}) == 1
    assert len({c["parent_id"] for c in fills}) >= 2  # fills of more than one draw
    assert len(set(FILLED)) == len(FILLED), FILLED
