"""The steps of a repair attempt besides running tests: the edit prompt, reading an answer's edits, and the
planner, critic and reproduction calls. Each is a small function of text in, text out; the repair's node
types (`nodes.py`, `rollout.py`) put them together. Prompts are Jinja templates (`prompts/*.j2`)."""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import jinja2

from agentflow.errors import ConfigError
from agentflow.models.ask import ask as ask_model
from agentflow.models.ask import code_block, code_blocks
from agentflow.models.base import ChatModel, declared_tool_calling
from agentflow.models.templates import Templates
from agentflow.pysyntax import parsed
from agentflow.repair.config import EditFormat, RepairConfig, RepairPrompts
from agentflow.repair.edit.edits import apply_edit, indent_of, parse_edits
from agentflow.repair.locate.focus import rotated
from agentflow.repair.locate.localize import (
    CONTEXT_MARKER,
    RunEvidence,
    Window,
    file_context,
    file_outline,
    rank_windows,
    render_window,
    repo_map,
    symbols,
    without_docstring,
    words,
)
from agentflow.repair.locate.statement import last_traceback, read_statement
from agentflow.repair.outcome import CandidateStatus
from agentflow.repair.verify.expectations import TracedExample, doctest_source
from agentflow.swe.patch import is_test_path

DEF_LINE = re.compile(r"(?:async\s+)?def\s+\w+")
"""The start of a function's `def` line, up to its name."""


MAX_SHOWN_EXAMPLE_CHARS = 300
"""What an example gave on the unchanged code, as the expectations prompt shows it, is cut to this."""

PROMPTS = Templates([Path(__file__).resolve().parents[1] / "prompts"])


class PromptSource(Protocol):
    """What holds the prompt templates: the run's config or a node's settings (`prompts`)."""

    prompts: RepairPrompts


class HelperCallSettings(PromptSource, Protocol):
    """The settings of a short helper call (a critic's review, the value agent's judgement)."""

    max_tokens: int


class CodeViewSettings(PromptSource, Protocol):
    """The settings of a prompt that shows the task's code windows (`code_windows`)."""

    windows: int
    window_lines: int
    rank_keep: int
    rank_keep_traced: bool
    max_prompt_chars: int


class CodeCallSettings(CodeViewSettings, HelperCallSettings, Protocol):
    """The settings of a call whose prompt shows code windows (the plan, the keep-working check)."""


class ScriptCallSettings(CodeCallSettings, Protocol):
    """The settings of the reproduction call (sampled: later tries differ)."""

    temperature: float


class EditPromptSettings(CodeViewSettings, Protocol):
    """The settings of an edit's prompt (`edit_prompt`, `rewrite_values`)."""

    edit_format: EditFormat
    file_context_lines: int
    file_outline: bool


class EditAskSettings(EditPromptSettings, Protocol):
    """The settings of the coder's edit prompt (`edit_prompt`) beyond what a rewrite shows of its window."""

    failure_above_code: bool


class RankCallSettings(CodeViewSettings, Protocol):
    """The settings of the suspect ranking call (`rank_suspects`)."""

    rank_pool: int
    rank_lines: int


def prompt_text(cfg: PromptSource, name: str) -> str:
    """The template of prompt `name`: the config's own text, else the shipped `prompts/<name>.j2`."""
    own: str | None = getattr(cfg.prompts, name)
    return own or PROMPTS.source(f"{name}.j2")


def render(cfg: PromptSource, name: str, values: Mapping[str, str] | None = None) -> str:
    """Prompt `name` rendered with `values` (a variable the template uses but `values` lacks is an error)."""
    own: str | None = getattr(cfg.prompts, name)
    try:
        if own:
            return PROMPTS.render_text(own, **(values or {}))
        return PROMPTS.render(f"{name}.j2", **(values or {}))
    except jinja2.TemplateError as exc:
        raise ConfigError(f"repair prompt {name!r}: {exc}", hint=f"it can use: {', '.join(sorted(values or {}))}") from None


async def ask_helper(model: ChatModel, cfg: PromptSource, name: str, values: Mapping[str, str], *, max_tokens: int,
                     seed: int, temperature: float = 0.0) -> str:
    """The text of a helper's answer to prompt `name` (the helpers' system prompt, `helper_system`)."""
    return (await ask_model(model, render(cfg, name, values), system=render(cfg, "helper_system"),
                            max_tokens=max_tokens, seed=seed, temperature=temperature)).text


def issue_text(problem_statement: str, hints: str = "", limit: int = 2500) -> str:
    """The statement (and hints) as every step shows it: cut to `limit` characters, keeping its assertion output
    (`statement.read_statement`) whole when the cut would drop it: what the failing test says is what the fix
    must change, and a long report's list of tests and frames can push it past the cut."""
    text = (problem_statement + ("\n\nHints:\n" + hints if hints.strip() else "")).strip()
    if len(text) <= limit:
        return text
    assertion = read_statement(problem_statement).assertion[: limit // 4]
    if not assertion or assertion in text[:limit]:
        return text[:limit] + "\n..."
    return f"{text[: limit - len(assertion)]}\n...\n{assertion}\n..."


@dataclass
class EditPrompt:
    system: str
    user: str
    focus_path: str | None
    """File of the first window shown (the path an answer without one most likely meant)."""
    window: Window | None = None
    """The window to rewrite (`edit_format: rewrite`)."""
    snippet: str = ""
    """The code the answer must give back whole (`edit_format: rewrite`)."""

    def max_tokens(self, cap: int) -> int:
        """The answer's output cap: `cap`, raised so that the rewrite of the window fits (about 3.5 characters
        a token for code, a fifth more and a fence's worth as slack): a fixed cap cuts the rewrite of a long
        window, or of one with long lines, mid-function, and the answer no longer parses."""
        return max(cap, len(self.snippet) * 12 // 35 + 48)


def public_api(sources: Mapping[str, str], *, per_class: int = 8) -> str:
    """`from pkg import a, b` lines for the top-level packages (what a script may import), each followed by
    the signatures of those names: how to construct and call them (small models guess wrongly otherwise)."""
    lines = []
    for path in sorted(sources):
        parts = path.split("/")
        if len(parts) != 2 or parts[1] != "__init__.py" or parts[0] in ("tests", "test"):
            continue
        if (tree := parsed(sources[path])) is None:
            continue
        names: list[str] = []
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                with_all = [e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)]
                names = [str(n) for n in with_all]
                break
            if isinstance(node, ast.ImportFrom):
                names += [a.asname or a.name for a in node.names if a.name != "*"]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(node.name)
        public = [n for n in dict.fromkeys(names) if not n.startswith("_")]
        if public:
            lines.append(f"from {parts[0]} import {', '.join(public)}")
            lines += _signatures(sources, parts[0], public, per_class)
    return "\n".join(lines) or "(no package found)"


_PLAIN_WORDS = frozenset({"assert", "def", "test", "self", "pytest", "raises", "with", "import", "from", "return",
                          "None", "True", "False", "for", "not", "and", "the", "match"})
"""Words every test has: sharing them with the issue says nothing."""


def usage_from_tests(sources: Mapping[str, str], issue: str, budget_chars: int = 1500) -> str:
    """The repository's own test functions that share the most names with the issue (shortest first among
    equals), with their file's imports, the module-level values and the fixtures they use: how the package's
    objects are made and called. Small models writing a reproduction without them guess constructors
    (`Config().set(...)` where the tests build it with `loads(TEXT)`), and many of their scripts then fail on an
    API the package does not have instead of on the bug."""
    wanted = words(issue) - _PLAIN_WORDS
    scored: list[tuple[int, int, str, ast.FunctionDef, str]] = []
    files: dict[str, tuple[list[str], dict[str, str]]] = {}
    fixtures: dict[str, str] = {}
    for path in sorted(sources):
        if not (is_test_path(path) and path.endswith(".py")):
            continue
        text = sources[path]
        if (tree := parsed(text)) is None:
            continue
        imports = [ast.get_source_segment(text, n) or "" for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        values = {t.id: ast.get_source_segment(text, n) or "" for n in tree.body if isinstance(n, ast.Assign)
                  for t in n.targets if isinstance(t, ast.Name)}
        files[path] = (imports, values)
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            if any("fixture" in ast.unparse(d) for d in node.decorator_list):
                fixtures.setdefault(node.name, "\n".join(text.split("\n")[node.lineno - 1 - len(node.decorator_list):
                                                                          node.end_lineno]))
            elif node.name.startswith("test"):
                body = ast.get_source_segment(text, node) or ""
                if shared := len(wanted & words(body)):
                    scored.append((-shared, len(body), path, node, body))
    picked: dict[str, list[tuple[ast.FunctionDef, str]]] = {}
    used = 0
    for _, size, path, node, body in sorted(scored, key=lambda x: x[:3])[:6]:
        if used + size <= budget_chars:
            picked.setdefault(path, []).append((node, body))
            used += size
    blocks = []
    for path, tests in picked.items():
        imports, values = files[path]
        names = words("\n".join(body for _, body in tests))
        params = {a.arg for node, _ in tests for a in node.args.args}
        parts = [*imports, *(v for k, v in values.items() if k in names and len(v) <= 400),
                 *(f for k, f in fixtures.items() if k in params and len(f) <= 600), *(body for _, body in tests)]
        blocks.append(f"```python\n# {path}\n" + "\n\n".join(p for p in parts if p) + "\n```")
    return "\n\n".join(blocks)


def _signatures(sources: Mapping[str, str], package: str, names: list[str], per_class: int) -> list[str]:
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = {}
    for path in sorted(sources):
        if not path.startswith(package + "/") or not path.endswith(".py"):
            continue
        if (tree := parsed(sources[path])) is None:
            continue
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name in names:
                defs.setdefault(stmt.name, stmt)
    out = []
    for name in names:
        node = defs.get(name)
        if isinstance(node, ast.ClassDef):
            methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            init = next((m for m in methods if m.name == "__init__"), None)
            bases = [ast.unparse(b) for b in node.bases]
            if init is None and any(b.endswith(("Error", "Exception")) for b in bases):
                out.append(f"    class {name}({', '.join(bases)})")
                continue
            out.append(f"    {name}({_params(init, bound=True) if init else ''}){_doc(node)}")
            public = [m for m in methods if not m.name.startswith("_")]
            out += [f"    {name}.{m.name}({_params(m, bound=_is_bound(m))})" for m in public[:per_class]]
        elif node is not None:
            out.append(f"    {name}({_params(node, bound=False)}){_doc(node)}")
    return out


def _doc(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    doc = (ast.get_docstring(node) or "").strip().split("\n")[0]
    return f"  # {doc[:100]}" if doc else ""


def _is_bound(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef, *, bound: bool) -> str:
    """The parameter list as written, without `self`/`cls` for a method."""
    args = fn.args
    if bound and (args.posonlyargs or args.args):
        args = ast.arguments(posonlyargs=args.posonlyargs[1:], args=args.args[1:] if not args.posonlyargs else args.args,
                             vararg=args.vararg, kwonlyargs=args.kwonlyargs, kw_defaults=args.kw_defaults,
                             kwarg=args.kwarg, defaults=args.defaults)
    return ast.unparse(args)


def suspects(cfg: CodeViewSettings, sources: Mapping[str, str], issue: str, feedback: str, *, focus: int,
             prefer: Sequence[tuple[str, str]] = (), evidence: RunEvidence | None = None) -> list[Window]:
    """Ranked code windows, the one sample number `focus` should look at first (`focus.ROTATION`); `prefer` (the model's
    ranking, see `rank_suspects`) follows the `rank_keep` best-scored windows; `evidence`: what the issue's
    examples and the tests ran (`agentflow.repair.locate.spectrum`)."""
    windows = rank_windows(sources, issue, feedback, max_lines=cfg.window_lines, limit=cfg.windows, prefer=prefer,
                           evidence=evidence, keep=cfg.rank_keep, keep_traced=cfg.rank_keep_traced)
    # when tracebacks point into code, windows without a frame mostly distract a small model; but the best of
    # them stays (a function the failing one calls, where the fault often is: `last` fails, `tail` is wrong)
    framed = [w for w in windows if w.frame]
    if framed:
        windows = framed + [w for w in windows if not w.frame][:1]
    return rotated(windows, focus)


def render_windows(sources: Mapping[str, str], windows: list[Window], budget_chars: int, *, at_least_one: bool,
                   marks: Mapping[str, Sequence[int]] | None = None) -> str:
    """The windows (with line numbers) that fit in `budget_chars`; `at_least_one` keeps the first regardless.
    `marks` (path -> lines, a line spectrum's `RunEvidence.marks`) are shown in the windows' gutter."""
    shown: list[str] = []
    note = PROMPTS.render("part_line_marks.j2", gutter=True, lines="") if marks else ""
    for window in windows:
        text = render_window(sources[window.path], window, (marks or {}).get(window.path, ()), note)
        if sum(len(x) + 2 for x in shown) + len(text) > budget_chars and (shown or not at_least_one):
            break
        shown.append(text)
    return "\n\n".join(shown)


def code_windows(
    cfg: CodeViewSettings, sources: Mapping[str, str], issue: str, feedback: str, *, focus: int, budget_chars: int,
    prefer: Sequence[tuple[str, str]] = (), evidence: RunEvidence | None = None,
) -> tuple[str, str | None]:
    """Rendered code windows within `budget_chars`, the `focus`-th suspect first; (text, its path)."""
    windows = suspects(cfg, sources, issue, feedback, focus=focus, prefer=prefer, evidence=evidence)
    return render_windows(sources, windows, budget_chars, at_least_one=True), (windows[0].path if windows else None)


def rewrite_values(cfg: EditPromptSettings, sources: Mapping[str, str], target: Window) -> dict[str, str]:
    """What a prompt asking for `target` rewritten shows of it: snippet (at column 0), symbol, lines, opening (the
    answer's first line, named) and file (the rest of its file, or an outline of it)."""
    lines = sources[target.path].split("\n")[target.start - 1 : target.end]
    snippet = textwrap.dedent("\n".join(lines))  # at column 0: models re-indent a first line
    values = {"snippet": snippet, "symbol": f"`{target.symbol}`" if target.symbol else "this code",
              "lines": f"{target.start}-{target.end}", "file": "", "opening": ""}
    # the answer's first line named: answers that begin elsewhere are mostly the issue's example or a test,
    # given back instead of the window's function
    opening = re.match(rf"\s*({DEF_LINE.pattern}\()", snippet)
    values["opening"] = PROMPTS.render("part_opening.j2", line=opening.group(1)) if opening else ""
    limit = cfg.file_context_lines
    rest = file_context(sources[target.path], target, max_lines=limit) if limit else ""
    listed = limit and not rest and cfg.file_outline
    outline = file_outline(sources[target.path], target, max_items=limit) if listed else ""
    if rest.strip():
        values["file"] = PROMPTS.render("part_rest_of_file.j2", path=target.path, rest=rest)
    elif outline:  # a list, not code: an outline in a code block was copied instead of the rewrite
        values["file"] = PROMPTS.render("part_outline.j2", path=target.path, outline=outline)
    return values


def rewrite_marks(sources: Mapping[str, str], target: Window, marked: Sequence[int]) -> str:
    """What a rewrite prompt says after its code of the lines a line spectrum marked in it: quoted, not marked
    in the code (which the answer gives back), "" when none lies in the window."""
    lines = sources[target.path].split("\n")
    inside = [n for n in marked if target.start <= n <= min(target.end, len(lines)) and lines[n - 1].strip()]
    if not inside:
        return ""
    quoted = ", ".join(f"`{lines[n - 1].strip()}`" for n in inside)
    return PROMPTS.render("part_line_marks.j2", gutter=False, lines=quoted, count=len(inside)) + "\n"


def edit_prompt(
    cfg: EditAskSettings,
    sources: Mapping[str, str],
    issue: str,
    feedback: str,
    *,
    plan: str = "",
    hint: str = "",
    focus: int = 0,
    windows: list[Window] | None = None,
    prefer: Sequence[tuple[str, str]] = (),
    evidence: RunEvidence | None = None,
) -> EditPrompt:
    """The coder's prompt; `focus` rotates which window comes first, so the samples of one search look at
    different suspects instead of all at the top-ranked one. `edit_format: rewrite` asks for the first window
    rewritten; `search_replace` for SEARCH/REPLACE blocks over all windows.
    `windows` replaces the ranked suspects, first one first (for a caller that knows where to look); `prefer`
    is the model's ranking of the suspects and `evidence` what running code showed (see `suspects`)."""
    fb = PROMPTS.render("part_feedback.j2", feedback=feedback[:1800]) if feedback.strip() else ""
    values = {
        "issue": issue, "repo_map": repo_map(sources), "feedback": fb, "hint": hint, "code": "", "path": "",
        "plan": PROMPTS.render("part_plan.j2", plan=plan.strip()) if plan.strip() else "", "snippet": "", "symbol": "", "lines": "",
        "file": "", "opening": "", "marks": "",
        "above_code": failure_above_code(issue) if cfg.failure_above_code else "",
    }
    template = cfg.edit_format if cfg.edit_format in ("rewrite", "tools") else "edit"
    base_len = len(render(cfg, "system", values)) + len(render(cfg, template, values))
    if windows is None:
        windows = suspects(cfg, sources, issue, feedback, focus=focus, prefer=prefer, evidence=evidence)
    windows = list(windows)
    target = windows[0] if windows else None
    marks = evidence.marks if evidence is not None else {}
    if cfg.edit_format == "rewrite":  # the window alone (with its file's rest), no other code
        if target is not None:
            values |= rewrite_values(cfg, sources, target)
            values["marks"] = rewrite_marks(sources, target, marks.get(target.path, ()))
        windows = []
    values["code"] = render_windows(sources, windows, cfg.max_prompt_chars - base_len, at_least_one=target is None,
                                    marks=marks)
    path = target.path if target else None
    values["path"] = path or "path/to/file.py"
    return EditPrompt(
        render(cfg, "system", values), render(cfg, template, values), path,
        target if cfg.edit_format == "rewrite" else None, values["snippet"],
    )


def failure_above_code(issue: str) -> str:
    """The statement's assertion or exception output (`Statement.assertion`), as shown directly above the code
    to edit (`failure_above_code`); "" when the statement has none (a report with examples only)."""
    assertion = read_statement(issue).assertion.strip()
    return PROMPTS.render("part_above_code.j2", failure=assertion[:800]) if assertion else ""


_TOOL_CALLING_PROVIDERS = ("openai:", "anthropic:", "litellm:")


def edit_format_for(cfg: RepairConfig, model: ChatModel) -> str:
    """The edit format a run uses: `cfg.edit_format`, with `auto` resolved for the coder model: `tools` when
    the model says it calls tools (its `supports_tools`, its serving profile, or a provider known for it),
    else `rewrite`. An OpenAI-compatible server says nothing, so it gets `rewrite` unless asked."""
    if cfg.edit.format != "auto":
        return cfg.edit.format
    declared = declared_tool_calling(model)
    if declared is None:
        declared = str(getattr(model, "spec", "")).startswith(_TOOL_CALLING_PROVIDERS)
    return "tools" if declared else "rewrite"


def read_rewrite(text: str, sources: Mapping[str, str], window: Window) -> ReadEdits:
    """Put an answer's code in place of the window's lines (re-indented like the original). The answer's
    last code block that changes the window is taken: small models often quote the faulty line in a block
    before the corrected code. When the window is a whole function, a block without its `def` line is such
    a quote, not a rewrite. When the window is part of a long function's body and the answer gives the whole
    function back (as models mostly do), the whole function is replaced: taken as the window's lines, it
    would nest a second copy of the function inside the first."""
    blocks = code_blocks(text)
    if not blocks:
        return ReadEdits("unparsable", errors=["no ```python code block in the answer"])
    name, whole = _def_name(sources, window), _enclosing_function(sources, window)
    result = ReadEdits("noop", errors=[UNCHANGED])
    for block in reversed(blocks):
        block = CONTEXT_MARKER.sub("", block)  # the rest-of-file context's placeholder, copied back
        target, defines, block, imports = _rewrite_target(block, sources, window, name, whole)
        read = _replace_lines(block, imports, sources, target, defines=defines)
        if read.status == "ok":
            return read
        if result.status == "noop" and read.errors and not read.errors[0].startswith(UNCHANGED):
            result = read
    return result


def _rewrite_target(block: str, sources: Mapping[str, str], window: Window, name: str,
                    whole: Window | None) -> tuple[Window, str, str, list[str]]:
    """What an answer's block replaces: (lines, the function name the block must define or "", the code, the
    standard imports it uses). `name`: the function the window starts with (`_def_name`); `whole`: the function
    the window is part of (`_enclosing_function`). A window that is a whole function takes the block's definition
    of it. A window that is part of a long function takes the block's definition of that function when the block
    gives the function back whole, and only its body when the block wraps the window's statements in the
    function's `def` line (the rest of the function left out); else the block as it is."""
    if name:
        found = _only_definition(block, name)
        return (window, name, *found) if found else (window, name, block, [])
    if whole is None:
        return window, "", block, []
    outer = whole.symbol.split(".")[-1]
    found = _only_definition(block, outer)
    if found is None:
        return window, "", block, []
    if _gives_back_the_rest(found[0], sources, whole, window):
        return whole, outer, *found
    return window, "", _body_of(found[0]), found[1]


def _gives_back_the_rest(definition: str, sources: Mapping[str, str], whole: Window, window: Window) -> bool:
    """Whether an answer's definition of a long function holds most of the function's lines outside the window
    (it gives back the whole function), not only the window's statements under the `def` line."""
    lines = _lines(sources, whole)
    outside = [line.strip() for line in lines[1 : window.start - whole.start] + lines[window.end - whole.start + 1 :]
               if line.strip()]
    given = {line.strip() for line in definition.split("\n")}
    return not outside or sum(line in given for line in outside) * 2 >= len(outside)


def _body_of(definition: str) -> str:
    """The statements of a definition's body after its docstring, at column 0."""
    tree = ast.parse(definition)
    node = tree.body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    body = without_docstring(node.body)
    lines = definition.split("\n")
    return textwrap.dedent("\n".join(lines[body[0].lineno - 1 : body[-1].end_lineno])) + "\n"


def _def_name(sources: Mapping[str, str], window: Window) -> str:
    """The name of the function the window starts with ("" when it starts elsewhere: part of a body)."""
    first = next((line.strip() for line in _lines(sources, window) if line.strip()), "")
    first = first if not first.startswith("@") else next(
        (line.strip() for line in _lines(sources, window) if DEF_LINE.match(line.strip())), first)
    definition = DEF_LINE.match(first)
    return definition.group(0).split()[-1] if definition else ""


def _lines(sources: Mapping[str, str], window: Window) -> list[str]:
    return sources[window.path].split("\n")[window.start - 1 : window.end]


def _enclosing_function(sources: Mapping[str, str], window: Window) -> Window | None:
    """The whole function a window shows part of (a long function's window is some statements of its body),
    or None when the window is a whole function or plain lines."""
    if not window.symbol:
        return None
    for sym in symbols(window.path, sources[window.path]):
        if sym.qualname == window.symbol and sym.start <= window.start <= window.end <= sym.end:
            if (sym.start, sym.end) == (window.start, window.end):
                return None
            return Window(window.path, sym.start, sym.end, window.score, window.symbol, window.frame)
    return None


def _replace_lines(block: str, imports: list[str], sources: Mapping[str, str], target: Window, *,
                   defines: str) -> ReadEdits:
    """The sources with `target`'s lines replaced by `block` (re-indented like them); `defines`: the function
    name the block must define (its `def` line), or "" when the target is not a whole function."""
    old_lines = sources[target.path].split("\n")
    original = old_lines[target.start - 1 : target.end]
    original_code = [line.strip() for line in original if line.strip()]
    first = original_code[0] if original_code else ""
    if defines:
        block = _keep_decorators_and_docstring(block, original)
    new = _reindent(block, original, in_class=first.startswith("class "))
    if defines and not any(re.match(rf"(?:async\s+)?def\s+{re.escape(defines)}\b", line.strip()) for line in new):
        return ReadEdits("noop", errors=[f"{NOT_GIVEN_BACK} (no `def {defines}`)"])
    if [line.strip() for line in new if line.strip()] == original_code:
        return ReadEdits("noop", errors=[UNCHANGED])
    content = _add_imports("\n".join(old_lines[: target.start - 1] + new + old_lines[target.end :]), imports)
    try:
        ast.parse(content)
    except SyntaxError as exc:
        return ReadEdits("apply_error", errors=[f"the rewritten code does not parse: {exc.msg} (line {exc.lineno})"])
    return ReadEdits("ok", {target.path: content})


def _keep_decorators_and_docstring(block: str, original: list[str]) -> str:
    """`block` (a function's definition) with the original function's decorators and docstring put back when the
    answer left them out: models drop them; a dropped `@property` breaks every caller, and a patch that deletes
    the docstring is another patch than the same fix keeping it (the vote counts them apart)."""
    old_text = textwrap.dedent("\n".join(original))
    new_tree, old_tree = parsed(block), parsed(old_text)
    if new_tree is None or old_tree is None:
        return block
    new, old = new_tree.body, old_tree.body
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    if len(new) != 1 or not isinstance(new[0], functions) or not old or not isinstance(old[-1], functions):
        return block
    new_fn, old_fn = new[0], old[-1]
    old_lines, lines = old_text.split("\n"), block.split("\n")
    if (ast.get_docstring(new_fn) is None and ast.get_docstring(old_fn) is not None
            and new_fn.body[0].lineno != new_fn.lineno):
        doc = old_lines[old_fn.body[0].lineno - 1 : old_fn.body[0].end_lineno]
        shift = new_fn.body[0].col_offset - old_fn.body[0].col_offset
        doc = [(" " * shift + line if shift >= 0 else line[-shift:]) if line.strip() else line for line in doc]
        at = new_fn.body[0].lineno - 1
        lines = lines[:at] + doc + lines[at:]
    if old_fn.decorator_list and not new_fn.decorator_list:
        first = min(d.lineno for d in old_fn.decorator_list)
        decorators = textwrap.dedent("\n".join(old_lines[first - 1 : old_fn.lineno - 1])).split("\n")
        at = new_fn.lineno - 1
        lines = lines[:at] + [indent_of(lines[at]) + line if line.strip() else line for line in decorators] + lines[at:]
    return "\n".join(lines)


def _only_definition(block: str, name: str) -> tuple[str, list[str]] | None:
    """The definition of `name` in an answer's block, without the other statements small models add around it
    (invented imports, helpers, usage examples, the issue's snippet), and the block's imports of standard
    library modules the definition uses (the fix may need them). When the block does not parse, the definition
    alone if it does (see `_complete_definition`); None when neither parses or it defines `name` other than
    exactly once."""
    text = textwrap.dedent(block)
    if (tree := parsed(text)) is None:
        alone = _complete_definition(text, name)
        return (alone, []) if alone is not None else None
    scopes = [tree.body, *(n.body for n in tree.body if isinstance(n, ast.ClassDef))]
    found = [n for body in scopes for n in body
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    if len(found) != 1:
        return None
    node = found[0]
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    lines = text.split("\n")
    definition = textwrap.dedent("\n".join(lines[start - 1 : node.end_lineno])) + "\n"
    used = set(re.findall(r"\w+", definition))
    # only the imports the definition uses: an unused `import csv` makes the same fix another patch
    imports = [ast.get_source_segment(text, n) or "" for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
               and all(_is_stdlib(a.name if isinstance(n, ast.Import) else n.module or "") for a in n.names)
               and not (isinstance(n, ast.ImportFrom) and n.level)
               and any((a.asname or a.name).split(".")[0] in used for a in n.names)]
    return definition, imports


def _complete_definition(text: str, name: str) -> str | None:
    """The definition of `name` in a block that does not parse as a whole: its lines from the `def` (and its
    decorators) to the next line indented no deeper, when they parse alone and such a line follows. Small models
    paste the failing tests' output around the function, or go on writing other functions until `max_tokens`
    cuts the block, and such a block often holds the whole function before the cut. A
    definition that runs to the block's end may itself be cut, so it is not taken."""
    lines = text.split("\n")
    for number, line in enumerate(lines):
        header = re.match(rf"(\s*)(?:async\s+)?def\s+{re.escape(name)}\s*\(", line)
        if not header:
            continue
        depth = len(header.group(1))
        start = number
        while start > 0 and lines[start - 1].strip().startswith("@") and indent_of(lines[start - 1]) == header.group(1):
            start -= 1
        end = number + 1
        while end < len(lines) and (not lines[end].strip() or len(indent_of(lines[end])) > depth):
            end += 1
        if end == len(lines):
            continue
        segment = textwrap.dedent("\n".join(lines[start:end]).rstrip())
        tree = parsed(segment)
        if tree is not None and len(tree.body) == 1 and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
            return segment + "\n"
    return None


def _is_stdlib(module: str) -> bool:
    return module != "__future__" and module.split(".")[0] in sys.stdlib_module_names


def _add_imports(content: str, imports: list[str]) -> str:
    """`imports` the file lacks, inserted after its last top-level import (or at the top)."""
    missing = [line for line in imports if line and line not in content.split("\n")]
    if not missing:
        return content
    if (tree := parsed(content)) is None:
        return content
    after = max((n.end_lineno or 0 for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))), default=0)
    if not after and tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
        after = tree.body[0].end_lineno or 0  # below the module docstring
    lines = content.split("\n")
    return "\n".join(lines[:after] + missing + lines[after:])


def _reindent(block: str, original: list[str], *, in_class: bool) -> list[str]:
    """An answer's block as lines indented like the window's first line (`in_class`: the window itself
    starts with a `class` line)."""
    indent = next((indent_of(line) for line in original if line.strip()), "")
    answer = block.rstrip("\n").split("\n")
    head = next((i for i, line in enumerate(answer) if line.strip()), 0)
    if re.match(r"class \w", answer[head].strip() if answer else "") and not in_class:
        answer = answer[head + 1 :]  # a method given back inside its class header: keep the method
    return [indent + line if line.strip() else "" for line in textwrap.dedent("\n".join(answer)).split("\n")]


def failure_report(issue: str, traced_errors: str, limit: int = 1500) -> str:
    """The failure the bug causes, as a prompt can show it apart from the issue: the last traceback the issue's
    examples raised when run call-traced (`traced_errors`), else the statement's own (`Statement.failure`)."""
    return (last_traceback(traced_errors) or read_statement(issue).failure)[-limit:]


UNCHANGED = "the code came back unchanged"
"""The error of a rewrite answer that gave its window back as it was."""
NOT_GIVEN_BACK = "the answer did not give the whole code back"
"""The error of a rewrite answer without the window's function (most often the issue's example, or a test)."""


@dataclass
class ReadEdits:
    """What an answer's SEARCH/REPLACE blocks do to the sources (computed in memory, nothing written)."""

    status: CandidateStatus
    files: dict[str, str] = field(default_factory=dict)
    """New contents of the files the answer changes."""
    errors: list[str] = field(default_factory=list)

    @property
    def declined(self) -> bool:
        """A rewrite that left its window alone: gave it back unchanged, or answered with other code than its
        function (the issue's example, a test) -- the model found nothing to fix there."""
        return self.status == "noop" and bool(self.errors) and self.errors[0].startswith((UNCHANGED, NOT_GIVEN_BACK))


def read_edits(text: str, sources: Mapping[str, str], default_path: str | None, *, complete: bool) -> ReadEdits:
    """Apply an answer's edit blocks to `sources` in memory. A block naming a file it does not match is
    applied to the one other file it matches, if exactly one (small models often name the wrong file)."""
    parsed = parse_edits(text, complete=complete)
    if not parsed.blocks:
        return ReadEdits("unparsable", errors=[parsed.problem or "no edit blocks"])
    errors = [parsed.problem] if parsed.problem else []
    files: dict[str, str] = {}
    for number, block in enumerate(parsed.blocks, start=1):
        path = block.path or default_path
        if path is None:
            errors.append(f"block {number}: no file path before <<<<<<< SEARCH")
            continue
        current = files.get(path, sources.get(path))
        try:
            if current is None:
                raise FileNotFoundError(path)
            files[path] = apply_edit(current, block.search, block.replace)
            continue
        except (ValueError, FileNotFoundError) as exc:
            why = str(exc) if isinstance(exc, ValueError) else "file does not exist"
        elsewhere = []
        for other, content in sources.items():
            if other == path:
                continue
            try:
                elsewhere.append((other, apply_edit(files.get(other, content), block.search, block.replace)))
            except ValueError:
                continue
        if len(elsewhere) == 1:
            files[elsewhere[0][0]] = elsewhere[0][1]
        else:
            errors.append(f"block {number} ({path}): {why}")
    changed = {p: c for p, c in files.items() if c != sources.get(p)}
    if not changed:
        return ReadEdits("apply_error" if errors else "noop", errors=errors)
    return ReadEdits("ok", changed, errors)


def read_answer(text: str, finish: str, prompt: EditPrompt, sources: Mapping[str, str]) -> ReadEdits:
    """What an edit answer to `prompt` does to `sources`: the rewrite of the prompt's window, else its
    SEARCH/REPLACE blocks (`finish`: the answer's finish reason; one cut at `length` may end mid-block). Blocks
    are read as such whatever form was asked for: a try in the other form (`rollout.NOOP_ESCALATION`) may be
    answered in the form of the tries before it."""
    if prompt.window is not None and not parse_edits(text).blocks:
        return read_rewrite(text, sources, prompt.window)
    return read_edits(text, sources, prompt.focus_path, complete=finish != "length")


async def make_plan(model: ChatModel, cfg: CodeCallSettings, issue: str, sources: Mapping[str, str], *, seed: int,
                    prefer: Sequence[tuple[str, str]] = (), evidence: RunEvidence | None = None) -> str:
    """The planner's short plan: which function is wrong and what to change."""
    code, _ = code_windows(cfg, sources, issue, "", focus=0, budget_chars=cfg.max_prompt_chars // 2, prefer=prefer,
                           evidence=evidence)
    values = {"issue": issue, "repo_map": repo_map(sources), "code": code, "api": public_api(sources)}
    text = await ask_helper(model, cfg, "plan", values, max_tokens=min(cfg.max_tokens, 200), seed=seed)
    return text.strip()[:1200]


async def rank_suspects(model: ChatModel, cfg: RankCallSettings, issue: str, sources: Mapping[str, str],
                        feedback: str = "", *, seed: int,
                        evidence: RunEvidence | None = None) -> list[tuple[str, str]]:
    """The model's pick among the heuristic's `rank_pool` best functions: (path, name) pairs, most likely
    first, as many as it named (at most `windows`). One short call; an answer without usable numbers gives []
    (the heuristic order stands)."""
    pool = [w for w in rank_windows(sources, issue, feedback, max_lines=cfg.window_lines, limit=cfg.rank_pool,
                                    evidence=evidence) if w.symbol]
    if len(pool) < 2:
        return []
    shown: list[str] = []
    budget = cfg.max_prompt_chars - len(issue) - len(prompt_text(cfg, "rank")) - 1300  # the feedback's share
    for number, window in enumerate(pool, 1):
        lines = sources[window.path].split("\n")[window.start - 1 : window.end]
        body = textwrap.dedent("\n".join(lines[: cfg.rank_lines]))
        more = "\n    ..." if len(lines) > cfg.rank_lines else ""
        item = f"[{number}] {window.path}, `{window.symbol}`:\n```python\n{body}{more}\n```"
        if sum(len(x) + 2 for x in shown) + len(item) > budget:
            break
        shown.append(item)
    values = {"issue": issue, "functions": "\n\n".join(shown), "count": str(len(shown)),
              "feedback": PROMPTS.render("part_feedback.j2", feedback=feedback[:1200]) if feedback.strip() else ""}
    text = await ask_helper(model, cfg, "rank", values, max_tokens=24, seed=seed)
    picked: list[tuple[str, str]] = []
    for number in map(int, re.findall(r"\d+", text)):
        if 1 <= number <= len(shown) and (key := (pool[number - 1].path, pool[number - 1].symbol)) not in picked:
            picked.append(key)
    return picked[: cfg.windows]


async def critique(model: ChatModel, cfg: HelperCallSettings, issue: str, patch: str, test_output: str, *, seed: int) -> str:
    """The critic's review of a candidate that did not pass: what is wrong and what to try instead."""
    values = {"issue": issue, "patch": patch[:3000], "tests": test_output[:2000] or "(no test output)"}
    text = await ask_helper(model, cfg, "critique", values, max_tokens=min(cfg.max_tokens, 200), seed=seed)
    return text.strip()[:1000]


def _script_context(cfg: CodeViewSettings, sources: Mapping[str, str], issue: str, prefer: Sequence[tuple[str, str]],
                    evidence: RunEvidence | None) -> dict[str, str]:
    """What a prompt asking for a script that runs the package shows: issue, code (the suspects), api (what the
    package exports) and usage (the repository's tests that share names with the issue)."""
    code, _ = code_windows(cfg, sources, issue, "", focus=0, budget_chars=cfg.max_prompt_chars // 2, prefer=prefer,
                           evidence=evidence)
    usage = usage_from_tests(sources, issue)
    return {"issue": issue, "code": code, "api": public_api(sources),
            "usage": PROMPTS.render("part_usage.j2", usage=usage) if usage else ""}


def previous_try(script: str, output: str) -> str:
    """The reproduction prompt's `previous`: an earlier script that did not reproduce the issue, and its output."""
    shown = script[:1500].rstrip() + "\n" if script.strip() else ""  # the closing fence on its own line
    return PROMPTS.render("reproduce_previous.j2", script=shown, output=output[-800:])


async def write_reproduction(
    model: ChatModel, cfg: ScriptCallSettings, issue: str, sources: Mapping[str, str], *, seed: int,
    previous: tuple[str, str] | None = None, prefer: Sequence[tuple[str, str]] = (),
    evidence: RunEvidence | None = None,
) -> str | None:
    """A standalone script that fails while the bug is present (None when the answer holds no code).
    `previous` is an earlier try that did not count (script, output): the model sees why."""
    values = {**_script_context(cfg, sources, issue, prefer, evidence), "repo_map": repo_map(sources),
              "previous": previous_try(*previous) if previous is not None else ""}
    # a retry at the first try's low temperature mostly repeats the same script
    temperature = 0.2 if previous is None else max(cfg.temperature, 0.8)
    return code_block(await ask_helper(model, cfg, "reproduce", values, max_tokens=cfg.max_tokens, seed=seed,
                                       temperature=temperature))


async def write_expectations(model: ChatModel, cfg: HelperCallSettings, issue: str, examples: Sequence[TracedExample], *,
                             seed: int) -> str:
    """The model's answer to what each of the issue's `examples` should give once fixed: the examples as a
    doctest of the fixed code (read by `expectations.read_expectations`)."""
    listed = "\n".join(f"{doctest_source(e.source)}\n{(e.shown or '(nothing)')[:MAX_SHOWN_EXAMPLE_CHARS]}"
                       for e in examples)
    text = await ask_helper(model, cfg, "expect", {"issue": issue, "examples": listed},
                            max_tokens=min(cfg.max_tokens, 400), seed=seed)
    return code_block(text) or text


async def write_keep_check(
    model: ChatModel, cfg: CodeCallSettings, issue: str, sources: Mapping[str, str], reproduction: str, *, seed: int,
    prefer: Sequence[tuple[str, str]] = (), evidence: RunEvidence | None = None,
) -> str | None:
    """A standalone script asserting what a fix of the issue must not change, written beside the kept
    `reproduction` (which shows the model how to call the package); None when the answer holds no code."""
    values = {**_script_context(cfg, sources, issue, prefer, evidence), "reproduction": reproduction.strip()[:1500]}
    return code_block(await ask_helper(model, cfg, "keep_check", values, max_tokens=cfg.max_tokens, seed=seed,
                                       temperature=0.2))
