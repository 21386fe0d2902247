"""Localization: which code windows of a repository an edit should look at, cheap and deterministic.

Functions (from the AST of every non-test file) score by the traceback frames they hold (the statement's and the
failing tests' output), then by the issue's identifiers in their name or body; what running code showed
(`RunEvidence`, `spectrum.py`) reweighs the scores when a workflow gathered it. A window is a whole function
when it is short, else the lines around the hit.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from agentflow.pysyntax import parsed
from agentflow.repair.edit.edits import indent_of
from agentflow.repair.locate.statement import Frame, read_frames, read_statement
from agentflow.swe.patch import is_test_path

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\(")
_CODE = re.compile(r"`([^`\n]+)`")
_STOP = frozenset([
    "the", "and", "for", "with", "that", "this", "from", "have", "not", "but", "are", "was", "were",
    "when", "what", "which", "into", "then", "than", "they", "them", "there", "their", "would", "should",
    "could", "value", "values", "return", "returns", "expected", "expect", "instead", "get", "gets", "got",
    "set", "does", "doesn", "isn", "just", "also", "only", "same", "like", "keep", "keeps", "kept", "even",
    "still", "thing", "things", "some", "any", "all", "one", "two", "use", "used", "using", "python",
    "version", "error", "errors", "raise", "raises", "raised", "bug", "issue", "work", "works", "line",
    "lines", "file", "files", "code", "test", "tests", "true", "false", "none", "self"
])


FRAME_SCORE = 10.0
"""Score a window gets for holding a traceback frame (issue words alone score less)."""
CALL_SCORE = 4.0
"""Score of a function the failing test output calls."""
MESSAGE_SCORE = 8.0
"""Score of a function whose source holds a message the issue quotes (an exception's text, a quoted string):
the code that raises or prints it."""
NOT_RUN_SHARE = 0.3
"""When the issue's examples ran code (`RunEvidence.executed`), a function they did not run keeps this share
of its score: it may still be the fault (an example that stops early), but words alone should not put it
above the path that ran."""
SUSPICION_WEIGHT = 2.0
"""With test spectra (`RunEvidence.suspicion`), a function's score is its word score as a share of the best
one plus this times its Ochiai suspiciousness (0..1): word scores differ by tens between a 3,000-line
module and a small one, the suspiciousness does not."""
CALLEE_SHARE = 0.5
"""Share of a function's score passed on to the repository functions it calls: the issue names the API a
user called (`getbool`), while the fault is often in a helper it calls (`to_bool`)."""


@dataclass
class Window:
    path: str
    start: int
    """First line (1-based, inclusive)."""
    end: int
    """Last line (inclusive)."""
    score: float
    symbol: str = ""
    """Qualified name of the function the window shows (`Class.method`, `function`); empty for plain lines."""
    frame: bool = False
    """A frame of the failure's traceback lies in this window."""


@dataclass(frozen=True)
class RunEvidence:
    """What running code says about where the fault is (gathered by `agentflow.repair.locate.spectrum`)."""

    executed: frozenset[tuple[str, str]] = frozenset()
    """(path, qualified name) of the functions the issue's own examples ran."""
    suspicion: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """Ochiai suspiciousness of functions, from which failing and passing runs reached them."""
    marks: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """path -> lines that stand out in the most suspect functions (a line spectrum, `agentflow.repair.locate.lines`):
    the edit prompt marks them in its windows."""

    def __bool__(self) -> bool:
        return bool(self.executed or self.suspicion)


@dataclass
class _Symbol:
    path: str
    name: str
    start: int
    end: int
    qualname: str = ""
    """`Class.method` for a method (`Outer.Inner.method`, `func.helper` for nested ones), else the name."""
    body: list[ast.stmt] = field(default_factory=list, repr=False, compare=False)
    """The function's statements (to cut a long function's window at statement boundaries)."""


_OPERATORS = (
    (re.compile(r"\bnot in\b|\bin\s+\w"), "__contains__"),
    (re.compile(r"\w\[[^\]\n]+\]\s*=[^=]"), "__setitem__"),
    (re.compile(r"\bdel\s+\w+\["), "__delitem__"),
    (re.compile(r"\w\[[^\]\n]+\](?!\s*=[^=])"), "__getitem__"),
    (re.compile(r"\blen\("), "__len__"),
    (re.compile(r"\biter\(|\bfor \w+ in\b|\blist\(|\bsorted\("), "__iter__"),
    (re.compile(r"[^<>=!]==[^=]|!="), "__eq__"),
    (re.compile(r"\w\s*<\s*\w"), "__lt__"),
    (re.compile(r"\w\s*>\s*\w"), "__gt__"),
    (re.compile(r"\bstr\(|\bprint\("), "__str__"),
    (re.compile(r"\brepr\("), "__repr__"),
    (re.compile(r"\bhash\("), "__hash__"),
    (re.compile(r"\w\s*\+\s*\w"), "__add__"),
)
"""What the issue's code does with objects, as the special methods that do it (`key in cache` calls
`__contains__`): a bug in a method of a class is reported through the operator, never by its name."""


def _issue_code(text: str) -> str:
    """The issue's code: fenced blocks, `>>>` lines and backticked spans."""
    fenced = re.findall(r"```[^\n]*\n(.*?)```", text, re.DOTALL)
    prompts = [line for line in text.split("\n") if line.lstrip().startswith((">>>", "..."))]
    return "\n".join([*fenced, *prompts, *_CODE.findall(text)])


def operator_methods(text: str) -> set[str]:
    """The special methods the issue's code calls through operators (see `_OPERATORS`)."""
    code = _issue_code(text)
    return {dunder for pattern, dunder in _OPERATORS if pattern.search(code)}


_BINDING = re.compile(r"^(?:\s*(?:>>>|\.\.\.))?\s*(\w+)\s*=\s*(?:[\w.]+\.)?([A-Z]\w*)\(", re.MULTILINE)


def _operators_on(var: str) -> tuple[tuple[re.Pattern[str], str], ...]:
    v = re.escape(var)
    return (
        (re.compile(rf"\bin\s+{v}\b"), "__contains__"),
        (re.compile(rf"\b{v}\[[^\]\n]+\]\s*=[^=]"), "__setitem__"),
        (re.compile(rf"\bdel\s+{v}\["), "__delitem__"),
        (re.compile(rf"\b{v}\[[^\]\n]+\](?!\s*=[^=])"), "__getitem__"),
        (re.compile(rf"\blen\({v}\)"), "__len__"),
    )


def bound_method_calls(text: str) -> set[tuple[str, str]]:
    """(class, method) pairs the issue's code calls on an instance it made: `cache = LRUCache(2)` then
    `cache.get("alice")` gives ("LRUCache", "get"), the method a user reports on (not `TTLCache.get`);
    `1 in cache` gives ("LRUCache", "__contains__")."""
    code = _issue_code(text)
    calls: set[tuple[str, str]] = set()
    for var, cls in _BINDING.findall(code):
        calls.update((cls, method) for method in re.findall(rf"\b{re.escape(var)}\.(\w+)\s*\(", code))
        calls.update((cls, dunder) for pattern, dunder in _operators_on(var) if pattern.search(code))
    return calls


def words(text: str) -> set[str]:
    """The identifier-like words of a text (three characters or more), as `issue_terms` reads an issue."""
    return set(_WORD.findall(text))


def issue_terms(text: str) -> dict[str, float]:
    """Identifiers of the issue with weights: code-looking words (backticked, snake_case, dotted) weigh more."""
    terms: dict[str, float] = {}
    for span in _CODE.findall(text):
        for word in _WORD.findall(span):
            terms[word] = max(terms.get(word, 0.0), 3.0)
    for word in _WORD.findall(text):
        low = word.lower()
        if low in _STOP:
            continue
        weight = 2.0 if ("_" in word or any(c.isupper() for c in word[1:])) else 1.0
        terms[word] = max(terms.get(word, 0.0), weight)
    return terms


_RAISED = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception|Warning)): (.{6,200})$", re.MULTILINE)
_QUOTED = re.compile(r"""["\u201c]([^"\n\u201d]{8,120})["\u201d]""")


def quoted_messages(text: str) -> list[str]:
    """Messages an issue quotes: the text of exceptions in its tracebacks and its quoted phrases, the words a
    function raising or printing them holds literally."""
    found = [m.strip().strip("'\"") for m in _RAISED.findall(text)] + [m.strip() for m in _QUOTED.findall(text)]
    # a message with formatted parts: its longest literal piece
    pieces = [max(re.split(r"\b\d+\b|'[^']*'", m), key=len).strip() for m in found]
    return [p for p in dict.fromkeys(pieces) if len(p) >= 6 and " " in p]


def _string_literals(sym: _Symbol) -> list[str]:
    """The string constants of a function's own body (not of functions nested in it: those are symbols too)."""
    out: list[str] = []
    stack: list[ast.AST] = list(sym.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
        stack.extend(ast.iter_child_nodes(node))
    return out


def traceback_frames(output: str | Sequence[Frame], files: set[str]) -> list[tuple[str, int]]:
    """(path, line) of traceback frames (in a text, or as `statement.read_frames` read them) that point into the
    repository's non-test files, deepest last."""
    frames = []
    for frame in read_frames(output) if isinstance(output, str) else output:
        path, line = frame.path, frame.line
        # the longest repository path the frame's path ends with: `/work/pkg/__init__.py` is `pkg/__init__.py`,
        # not another package's `__init__.py`
        matches = [f for f in files if path == f or path.endswith("/" + f) or f.endswith("/" + path)]
        hit = max(matches, key=lambda f: (path.endswith(f), len(f), f)) if matches else None
        if hit is not None and not is_test_path(hit):
            frames.append((hit, line))
    return frames


def failure_calls(output: str, files: set[str]) -> set[str]:
    """The names a failure output's code calls (`name(`), without the code lines of traceback frames outside the
    repository: those show the calls the issue reports, which its words already rank; counted again, they can
    push the function the fault lies in out of the suspects."""
    kept: list[str] = []
    outside = False
    for line in output.split("\n"):
        frame = re.match(r'\s*File "([^"]+)", line \d+', line)
        if frame:
            path = frame.group(1)
            outside = not any(path == f or path.endswith("/" + f) for f in files)
            continue
        if outside:  # the frame's source line
            outside = False
            continue
        kept.append(line)
    return set(_CALL.findall("\n".join(kept)))


def symbols(path: str, source: str) -> list[_Symbol]:
    """Functions and methods (innermost spans) of a Python file, with qualified names; none when it does not parse."""
    if (tree := parsed(source)) is None:
        return []
    out: list[_Symbol] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                out.append(_Symbol(path, node.name, start, node.end_lineno or node.lineno, prefix + node.name,
                                   node.body))
                visit(node.body, f"{prefix}{node.name}.")
            else:  # functions defined under if/try/with at module or class level
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        visit([n for n in inner if isinstance(n, ast.AST)], prefix)  # type: ignore[misc]

    visit(tree.body, "")
    return out


def functions_touched(patch: str, sources: Mapping[str, str]) -> list[str]:
    """`path:qualname` of the functions a unified diff changes (innermost, in the order of its old side's lines
    it removes or inserts at); a change outside any function counts as `path:`."""
    from agentflow.swe.patch import parse_patch

    touched: list[str] = []
    for fp in parse_patch(patch).files:
        path = fp.old_path or fp.new_path or ""
        if path not in sources:
            continue
        syms = symbols(path, sources[path])
        for line in _old_lines_changed(fp.text):
            inside = [s for s in syms if s.start <= line <= s.end]
            name = f"{path}:{min(inside, key=lambda s: s.end - s.start).qualname}" if inside else f"{path}:"
            if name not in touched:
                touched.append(name)
    return touched


_HUNK_HEAD = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


def _old_lines_changed(file_diff: str) -> list[int]:
    """Old-file line numbers a file's diff removes, or inserts before (an addition belongs to the line above
    it, so an added line at a function's end counts for that function)."""
    changed: list[int] = []
    old = 0
    for line in file_diff.split("\n"):
        head = _HUNK_HEAD.match(line)
        if head:
            old = int(head.group(1))
            continue
        if not old or line.startswith(("---", "+++")):
            continue
        if line.startswith("-"):
            changed.append(old)
            old += 1
        elif line.startswith("+"):
            changed.append(max(1, old - 1))
        elif line.startswith(" ") or line == "":
            old += 1
    return changed


def repo_map(sources: Mapping[str, str], limit_chars: int = 1500) -> str:
    """`path: func, func, ...` lines for the non-test files (the model's overview of the repository)."""
    lines = []
    for path in sorted(sources):
        if is_test_path(path):
            continue
        names = [s.name for s in symbols(path, sources[path]) if not s.name.startswith("__")]
        lines.append(f"{path}: {', '.join(dict.fromkeys(names))}" if names else path)
    text = "\n".join(lines)
    return text if len(text) <= limit_chars else text[:limit_chars].rsplit("\n", 1)[0] + "\n..."


def rank_windows(
    sources: Mapping[str, str], issue: str, failure_output: str = "", *, max_lines: int = 40, limit: int = 3,
    prefer: Sequence[tuple[str, str]] = (), evidence: RunEvidence | None = None, keep: int = 0,
    keep_traced: bool = False,
) -> list[Window]:
    """The best `limit` code windows for an edit, best first: the `keep` best-scored (with `keep_traced`, and
    the best-scored of the most suspect functions by `evidence.suspicion`), then the (path, qualified name)
    pairs `prefer` lists (a model's ranking) in that order, then the others by score. `evidence` (what the
    issue's examples and the tests ran) reweighs the scores."""
    evidence = evidence or RunEvidence()
    terms = issue_terms(issue)
    operators = operator_methods(issue)
    bound = bound_method_calls(issue)
    code_files = {p for p in sources if not is_test_path(p)}
    # the statement's own traceback (a failing-test report's, a pasted one) and the failing tests' output at hand,
    # each frame with its depth in its own traceback
    frames = [(path, line, depth) for found in (traceback_frames(read_statement(issue).frames, set(sources)),
                                                traceback_frames(failure_output, set(sources)))
              for depth, (path, line) in enumerate(found)]
    # functions the failing tests call (their source shows in the failure output) are likely culprits
    called = failure_calls(failure_output, set(sources))
    messages = quoted_messages(issue + "\n" + failure_output)
    scored: list[tuple[float, _Symbol, int | None]] = []
    for path in sorted(code_files):
        source = sources[path]
        file_lines = source.split("\n")
        file_bonus = sum(w for t, w in terms.items() if t in path) * 0.5
        for sym in symbols(path, source):
            body = "\n".join(file_lines[sym.start - 1 : sym.end])
            score = file_bonus
            score += sum(w * 2 for t, w in terms.items() if t == sym.name or t.endswith("." + sym.name))
            owners = sym.qualname.split(".")[:-1]  # a method of a class the issue names
            named = sum(terms.get(owner, 0.0) for owner in owners)
            if named and sym.name in operators:  # `key in cache` of a class the issue names
                score += 2.5 * named
            if owners and (owners[-1], sym.name) in bound:  # `cache.get(...)` of `cache = LRUCache(2)`
                score += 2.5 * terms.get(owners[-1], 0.0)
            score += sum(w for t, w in terms.items() if t in body) * 0.5
            if sym.name in called:
                score += CALL_SCORE
            if messages and any(m in text for text in _string_literals(sym) for m in messages):
                score += MESSAGE_SCORE
            focus = None
            for fpath, fline, depth in frames:
                if fpath == path and sym.start <= fline <= sym.end:
                    score += FRAME_SCORE + depth  # deeper frames are closer to the fault
                    focus = fline
            scored.append((score, sym, focus))
    scored = _weigh_by_runs(_pass_to_callees(scored, sources), evidence)
    scored.sort(key=lambda item: (-item[0], item[1].end - item[1].start, item[1].path, item[1].start))
    if prefer and scored:  # the heuristic's best keep their places (`rank_keep`)
        kept = scored[:keep]
        traced = _most_suspect(scored, evidence) if keep_traced else None
        if traced is not None and traced not in kept:
            kept.append(traced)
        order = {key: i for i, key in enumerate(prefer)}
        rest = sorted((item for item in scored if item not in kept),
                      key=lambda item: order.get((item[1].path, item[1].qualname), len(order)))  # stable
        scored = [*kept, *rest]
    windows: list[Window] = []
    for score, sym, focus in scored:
        if len(windows) >= limit:
            break
        if score <= 0 and (sym.path, sym.qualname) not in prefer:  # a model's pick counts without the issue's words
            continue
        # innermost spans win: skip a symbol that contains or is contained in a window already chosen
        if any(w.path == sym.path and not (sym.end < w.start or sym.start > w.end) for w in windows):
            continue
        start, end = function_window(sym, max_lines, focus if focus is not None else _term_line(sym, sources, terms))
        windows.append(Window(sym.path, start, end, round(score, 2), sym.qualname, frame=focus is not None))
    if not windows and code_files:  # nothing matched: the start of the first file is better than nothing
        path = min(code_files)
        windows.append(Window(path, 1, min(max_lines, len(sources[path].split("\n"))), 0.0))
    return windows


def _most_suspect(
    scored: list[tuple[float, _Symbol, int | None]], evidence: RunEvidence
) -> tuple[float, _Symbol, int | None] | None:
    """The best-scored of the functions the runs' suspiciousness puts highest (None without any above 0)."""
    top = max(evidence.suspicion.values(), default=0.0)
    if top <= 0:
        return None
    return next((item for item in scored if evidence.suspicion.get((item[1].path, item[1].qualname)) == top), None)


def _weigh_by_runs(
    scored: list[tuple[float, _Symbol, int | None]], evidence: RunEvidence
) -> list[tuple[float, _Symbol, int | None]]:
    """Scores with the runs' evidence (SUSPICION_WEIGHT, NOT_RUN_SHARE)."""
    if evidence.suspicion:
        top = max((score for score, _, _ in scored), default=0.0) or 1.0
        scored = [(score / top + SUSPICION_WEIGHT * evidence.suspicion.get((sym.path, sym.qualname), 0.0), sym, focus)
                  for score, sym, focus in scored]
    if evidence.executed:
        scored = [(score if (sym.path, sym.qualname) in evidence.executed else score * NOT_RUN_SHARE, sym, focus)
                  for score, sym, focus in scored]
    return scored


def function_window(sym: _Symbol, max_lines: int, focus: int | None) -> tuple[int, int]:
    """The lines of a function to show: all of it when its code (not its `def` line and docstring) has at most
    `max_lines`, else whole statements of its body around `focus` (the traceback's line, or the line naming most
    of the issue's words), descending into a compound statement too long to show whole: a small model rewrites
    a window cut mid-statement, or cut off from its `def`, wrongly."""
    if not sym.body:
        return sym.start, sym.end
    body = without_docstring(sym.body)
    if sym.end - body[0].lineno + 1 <= max_lines:
        return sym.start, sym.end
    target = focus if focus is not None else body[0].lineno
    while True:
        at = next((i for i, st in enumerate(body) if _span(st)[0] <= target <= _span(st)[1]), None)
        if at is None:  # the focus is between statements (a comment): the next statement
            at = next((i for i, st in enumerate(body) if _span(st)[0] > target), len(body) - 1)
        first, last = _span(body[at])
        inner = _inner_body(body[at], target)
        if last - first + 1 > max_lines and not inner:  # the focus is on a long block's header: its first block
            inner = _inner_body(body[at], _first_block_line(body[at]))
            target = _span(inner[0])[0] if inner else target
        if last - first + 1 > max_lines and inner:
            body = inner
            continue
        if last - first + 1 > max_lines:  # one long simple statement: lines around the focus
            return clip_span(first, last, max_lines, target)
        lo = hi = at
        while True:  # grow by whole statements, after the focus first (the fault is more often below)
            grown = False
            for j in (hi + 1, lo - 1):
                if 0 <= j < len(body):
                    a, b = min(_span(body[j])[0], first), max(_span(body[j])[1], last)
                    if b - a + 1 <= max_lines:
                        first, last, lo, hi, grown = a, b, min(lo, j), max(hi, j), True
            if not grown:
                return first, last


def _span(node: ast.stmt) -> tuple[int, int]:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)]), node.end_lineno or node.lineno


def without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    """A function's statements after its docstring (all of them when it has none, or nothing else)."""
    first = body[0]
    is_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    return body[1:] if is_doc and len(body) > 1 else body


def _inner_body(node: ast.stmt, line: int) -> list[ast.stmt]:
    """The statements of a compound statement's block holding `line` (if/for/while/with/try bodies)."""
    blocks: list[list[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            blocks.append(block)
    blocks += [h.body for h in getattr(node, "handlers", [])]
    blocks += [c.body for c in getattr(node, "cases", [])]
    for block in blocks:
        if _span(block[0])[0] <= line <= _span(block[-1])[1]:
            return block
    return []


def _first_block_line(node: ast.stmt) -> int:
    """The first line of a compound statement's first block (its own line for a simple statement)."""
    body = getattr(node, "body", None)
    return _span(body[0])[0] if isinstance(body, list) and body and isinstance(body[0], ast.stmt) else node.lineno


def _term_line(sym: _Symbol, sources: Mapping[str, str], terms: Mapping[str, float]) -> int | None:
    """The line of a long function naming most of the issue's words (None: no line names any)."""
    lines = sources[sym.path].split("\n")
    best, best_score = None, 0.0
    code_start = without_docstring(sym.body)[0].lineno if sym.body else sym.start + 1
    for n in range(code_start, sym.end + 1):
        text = lines[n - 1]
        score = sum(w for t, w in terms.items() if t in text)
        if score > best_score:
            best, best_score = n, score
    return best


def clip_span(start: int, end: int, max_lines: int, focus: int | None = None) -> tuple[int, int]:
    """Lines `start`-`end` cut to at most `max_lines`, centred on `focus` (else from the start)."""
    if end - start + 1 <= max_lines:
        return start, end
    first = max(start, (focus or start + max_lines // 2) - max_lines // 2)
    return first, min(end, first + max_lines - 1)


_REF = re.compile(r"\b([A-Za-z_]\w*)\s*\(|\.([A-Za-z_]\w*)\b")
"""A call `name(` or an attribute reference `x.name` (a helper passed along, like `values.to_bool`)."""


def _pass_to_callees(
    scored: list[tuple[float, _Symbol, int | None]], sources: Mapping[str, str]
) -> list[tuple[float, _Symbol, int | None]]:
    """Add CALLEE_SHARE of each function's score to the repository functions its body calls or refers to
    (one hop). A name resolves to the definitions in the caller's own file, else to the one definition in
    the repository of that name (common names like `get` in several files resolve to nothing)."""
    by_name: dict[str, list[int]] = {}
    for i, (_, sym, _) in enumerate(scored):
        by_name.setdefault(sym.name, []).append(i)
    bonus = [0.0] * len(scored)
    lines: dict[str, list[str]] = {}
    for score, sym, _ in scored:
        if score <= 0:
            continue
        if sym.path not in lines:
            lines[sym.path] = sources[sym.path].split("\n")
        body = "\n".join(lines[sym.path][sym.start : sym.end])  # without the def line
        names = {a or b for a, b in _REF.findall(body)} - {sym.name}
        for name in names:
            defs = by_name.get(name, [])
            local = [i for i in defs if scored[i][1].path == sym.path]
            for i in local or (defs if len(defs) == 1 else []):
                bonus[i] = max(bonus[i], CALLEE_SHARE * score)
    return [(score + extra, sym, focus) for (score, sym, focus), extra in zip(scored, bonus, strict=True)]


def render_window(source: str, window: Window, marked: Collection[int] = (), note: str = "") -> str:
    """The window's lines with a line-number gutter, headed by the path. Lines in `marked` get a `*` in the
    gutter (never in the code: a SEARCH text copied from the window still matches the file), and `note`, which
    says what the mark means, follows the window; a window without marked lines is shown as it would be
    without marks."""
    lines = source.split("\n")
    shown = range(window.start, min(window.end, len(lines)) + 1)
    if not any(n in marked for n in shown):
        body = "\n".join(f"{n:4d}| {lines[n - 1]}" for n in shown)
        return f"{window.path} (lines {window.start}-{window.end})\n{body}"
    body = "\n".join(f"{'*' if n in marked else ' '}{n:4d}| {lines[n - 1]}" for n in shown)
    return f"{window.path} (lines {window.start}-{window.end})\n{body}" + (f"\n{note}" if note else "")


CONTEXT_MARKER = re.compile(r"^[ \t]*# \.\.\. .+ \(lines \d+-\d+, given below\) \.\.\.[ \t]*(?:\n|$)", re.MULTILINE)
"""The line `file_context` puts where the window was (models copy it back into their answer)."""


def file_context(source: str, window: Window, *, max_lines: int) -> str:
    """The window's file without the window when it has at most `max_lines` lines, else "" (`file_outline`): a
    small model rewriting one function then sees the names it may use instead of inventing them."""
    lines = source.split("\n")
    marker = f"# ... {window.symbol or 'the code'} (lines {window.start}-{window.end}, given below) ..."
    indent = next((indent_of(ln) for ln in lines[window.start - 1 : window.end] if ln.strip()), "")
    rest = lines[: window.start - 1] + [indent + marker] + lines[window.end :]
    return "\n".join(rest).strip("\n") if len(rest) <= max_lines else ""


def file_outline(source: str, window: Window, *, max_items: int) -> str:
    """What a long file defines besides the window, as a plain list (imports, module-level names, classes with
    their methods, functions with their parameters): an outline shown as code is often given back instead of
    the rewrite by a small model."""
    if (tree := parsed(source)) is None:
        return ""
    imports: list[str] = []
    names: list[str] = []
    items: list[str] = []
    for node in tree.body:
        inside = window.start <= node.lineno <= window.end
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports += [a.asname or a.name for a in node.names]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.ClassDef):
            methods = [m.name for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and not window.start <= m.lineno <= window.end]
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            items.append(f"class {node.name}" + (f"({bases})" if bases else "") +
                         (f": methods {', '.join(methods)}" if methods else ""))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not inside:
            items.append(f"function {node.name}({ast.unparse(node.args)[:100]})")
    head = [f"imports: {', '.join(imports)}"] if imports else []
    head += [f"module-level names: {', '.join(names[:40])}"] if names else []
    return "\n".join(f"- {line}" for line in (head + items)[:max_items])
