"""Hierarchical localization by the model (Agentless, Xia et al. 2024; `docs/workflows/agentless.md`), node type
`swe.localize` in place of `swe.rank`: skeleton -> files -> classes/functions -> edit locations, three short
calls, whose locations are the `ranked` suspects (`localize.rank_windows` merges them).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from agentflow.events.kinds import RepairLocalize
from agentflow.graph.run.context import NodeContext
from agentflow.models.base import ChatModel
from agentflow.pysyntax import parsed
from agentflow.repair.edit.steps import ask_helper
from agentflow.repair.locate.localize import Window, render_window, repo_map, symbols
from agentflow.repair.nodetypes.nodekit import emit
from agentflow.repair.nodetypes.runtime import PromptSettings, RepairRuntime, ShowsCodeSettings, setting_of
from agentflow.repair.nodetypes.state import LocalizedRecord, RepairState
from agentflow.swe.patch import is_test_path


class LocalizeSettings(PromptSettings):
    """Settings of the swe.localize node type."""

    localize_files: int = Field(default=3, ge=1, le=10)
    """Files the model picks from the repository skeleton."""
    localize_symbols: int = Field(default=5, ge=1, le=20)
    """Classes/functions the model picks in those files (and edit locations among them)."""
    max_prompt_chars: int = setting_of(ShowsCodeSettings, "max_prompt_chars")
    window_lines: int = setting_of(ShowsCodeSettings, "window_lines")


_LINE = re.compile(r"\bline\s+(\d+)", re.IGNORECASE)


def skeleton(path: str, source: str) -> str:
    """A file's outline: class and function signatures (methods indented) with their line numbers."""
    if (tree := parsed(source)) is None:
        return f"{path}: (does not parse)"
    lines = [f"{path}:"]

    def walk(body: list[ast.stmt], indent: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                lines.append(f"{node.lineno:>5}| {indent}class {node.name}:")
                walk(node.body, indent + "    ")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
                lines.append(f"{node.lineno:>5}| {indent}{prefix} {node.name}({ast.unparse(node.args)}):")

    walk(tree.body, "")
    return "\n".join(lines)


def _code_files(sources: Mapping[str, str]) -> list[str]:
    return sorted(p for p in sources if p.endswith(".py") and not is_test_path(p))


def read_files(text: str, sources: Mapping[str, str], limit: int) -> list[str]:
    """The code files an answer names, in its order."""
    files = _code_files(sources)
    found: list[str] = []
    for line in text.splitlines():
        for path in sorted(files, key=len, reverse=True):  # `a/b.py` before `b.py`
            if path in line or ("/" in path and line.strip().strip("`*- ") == path.rsplit("/", 1)[1]):
                if path not in found:
                    found.append(path)
                break
    return found[:limit]


def _qualified_names(path: str, source: str) -> dict[str, str]:
    """A file's functions by what an answer may call them: the qualified name (`Cache.get`), and the bare name
    (`get`) when one function has it."""
    syms = symbols(path, source)
    bare: dict[str, list[str]] = {}
    for sym in syms:
        bare.setdefault(sym.name, []).append(sym.qualname)
    return {**{n: q[0] for n, q in bare.items() if len(q) == 1}, **{s.qualname: s.qualname for s in syms}}


def read_locations(text: str, sources: Mapping[str, str], files: list[str], limit: int) -> list[tuple[str, str]]:
    """(path, function name) pairs an answer names, in its order: `path: name`, `path: Class.name` or
    `path: line N` (the innermost function there); a line without a known path: the first of `files` that has
    the name."""
    found: list[tuple[str, str]] = []
    for line in text.splitlines():
        named = read_files(line, sources, 1)
        paths = named or files
        hit: tuple[str, str] | None = None
        if (m := _LINE.search(line)) and named:
            number = int(m.group(1))
            inner = [s for s in symbols(named[0], sources[named[0]]) if s.start <= number <= s.end]
            if inner:
                best = min(inner, key=lambda s: s.end - s.start)
                hit = (best.path, best.qualname)
        if hit is None:
            rest = line.split(":", 1)[1] if named and ":" in line else line
            words = re.findall(r"[A-Za-z_][\w.]*\w|[A-Za-z_]", rest)
            for path in paths:
                qualified = _qualified_names(path, sources[path])
                name = next((qualified[w] for w in reversed(words) if w in qualified), None)
                if name is not None:
                    hit = (path, name)
                    break
        if hit is not None and hit not in found:
            found.append(hit)
    return found[:limit]


async def localize_hierarchy(model: ChatModel, cfg: LocalizeSettings, issue: str, sources: Mapping[str, str], *,
                             seed: int) -> dict[str, Any]:
    """The three steps: what each chose (`files`, `symbols`, `locations`), and `ranked`, locations then the other
    chosen functions."""
    budget = max(500, cfg.max_prompt_chars - len(issue) - 600)
    values = {"issue": issue, "skeleton": repo_map(sources, limit_chars=budget), "count": str(cfg.localize_files)}
    text = await ask_helper(model, cfg, "localize_files", values, max_tokens=96, seed=seed)
    files = read_files(text, sources, cfg.localize_files)
    if not files:
        return {"files": [], "symbols": [], "locations": [], "ranked": []}
    outlines = "\n\n".join(skeleton(p, sources[p]) for p in files)[:budget]
    values = {"issue": issue, "skeletons": outlines, "count": str(cfg.localize_symbols)}
    text = await ask_helper(model, cfg, "localize_symbols", values, max_tokens=128, seed=seed)
    chosen = read_locations(text, sources, files, cfg.localize_symbols)
    locations: list[tuple[str, str]] = []
    if chosen:
        shown = []
        for path, name in chosen:
            sym = next(s for s in symbols(path, sources[path]) if s.qualname == name)
            window = Window(path, sym.start, min(sym.end, sym.start + cfg.window_lines * 2), 0.0, name)
            shown.append(render_window(sources[path], window))
        values = {"issue": issue, "code": "\n\n".join(shown)[:budget], "count": str(cfg.localize_symbols)}
        text = await ask_helper(model, cfg, "localize_lines", values, max_tokens=128, seed=seed)
        locations = read_locations(text, sources, [p for p, _ in chosen], cfg.localize_symbols)
    ranked = list(dict.fromkeys([*locations, *chosen]))
    return {"files": files, "symbols": chosen, "locations": locations, "ranked": ranked}


async def localize_node(state: RepairState, ctx: NodeContext[RepairRuntime], settings: LocalizeSettings) -> RepairState:
    rt = ctx.deps
    found = await localize_hierarchy(rt.models.coder, settings, rt.issue, await rt.bench.python_sources(),
                                     seed=settings.seed)
    localized: LocalizedRecord = {"files": found["files"], "symbols": [f"{p}:{n}" for p, n in found["symbols"]],
                                  "locations": [f"{p}:{n}" for p, n in found["locations"]]}
    emit(rt, RepairLocalize(**localized))
    return {"ranked": [[p, n] for p, n in found["ranked"]], "localized": localized}


__all__ = ["LocalizeSettings", "localize_hierarchy", "localize_node", "read_files", "read_locations", "skeleton"]
