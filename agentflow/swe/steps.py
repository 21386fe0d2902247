"""The steps of a repair attempt besides running tests: the edit prompt, reading an answer's edits, and the
planner, critic and reproduction calls. Each is a small function of text in, text out; the policy
(`agentflow.swe.policy`) puts them together."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from agentflow.models.base import ChatModel, ChatRequest, ChatResponse, Message
from agentflow.swe.edits import apply_edit, parse_edits
from agentflow.swe.localize import FRAME_SCORE, rank_windows, render_window, repo_map

if TYPE_CHECKING:
    from agentflow.swe.repair import RepairConfig

EditStatus = Literal["ok", "noop", "unparsable", "apply_error"]


def fill(template: str, values: Mapping[str, str]) -> str:
    """`{name}` fields filled in; other braces (code in prompts) are left alone."""
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), template)


def issue_text(problem_statement: str, hints: str = "", limit: int = 2500) -> str:
    text = (problem_statement + ("\n\nHints:\n" + hints if hints.strip() else "")).strip()
    return text if len(text) <= limit else text[:limit] + "\n..."


@dataclass
class EditPrompt:
    messages: list[Message]
    focus_path: str | None
    """File of the first window shown (the path an answer without one most likely meant)."""


def code_windows(
    cfg: RepairConfig, sources: Mapping[str, str], issue: str, feedback: str, *, focus: int, budget_chars: int
) -> tuple[str, str | None]:
    """Rendered code windows within `budget_chars`, the `focus`-th suspect first; (text, its path)."""
    windows = rank_windows(sources, issue, feedback, max_lines=cfg.window_lines, limit=cfg.windows)
    # when tracebacks point into code, windows without a frame only distract a small model
    windows = [w for w in windows if w.score >= FRAME_SCORE] or windows
    if windows:
        first = focus % len(windows)
        windows = windows[first:] + windows[:first]
    shown: list[str] = []
    for window in windows:
        text = render_window(sources[window.path], window)
        if sum(len(s) + 2 for s in shown) + len(text) > budget_chars and shown:
            break
        shown.append(text)
    return "\n\n".join(shown), (windows[0].path if windows else None)


def edit_prompt(
    cfg: RepairConfig,
    sources: Mapping[str, str],
    issue: str,
    feedback: str,
    *,
    plan: str = "",
    hint: str = "",
    focus: int = 0,
) -> EditPrompt:
    """The coder's prompt; `focus` rotates which window comes first, so the samples of one search look at
    different suspects instead of all at the top-ranked one."""
    fb = f"Test results of the current code:\n{feedback[:1800]}" if feedback.strip() else ""
    values = {
        "issue": issue, "repo_map": repo_map(sources), "feedback": fb, "hint": hint, "code": "", "path": "",
        "plan": f"Plan:\n{plan.strip()}\n" if plan.strip() else "",
    }
    base_len = len(fill(cfg.prompts.system, values)) + len(fill(cfg.prompts.edit, values))
    values["code"], path = code_windows(
        cfg, sources, issue, feedback, focus=focus, budget_chars=cfg.max_prompt_chars - base_len
    )
    values["path"] = path or "path/to/file.py"
    return EditPrompt(
        [Message.system(fill(cfg.prompts.system, values)), Message.user(fill(cfg.prompts.edit, values))], path
    )


@dataclass
class ReadEdits:
    """What an answer's SEARCH/REPLACE blocks do to the sources (computed in memory, nothing written)."""

    status: EditStatus
    files: dict[str, str] = field(default_factory=dict)
    """New contents of the files the answer changes."""
    errors: list[str] = field(default_factory=list)


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


def first_text(response: ChatResponse) -> tuple[str, str]:
    """(text, finish reason) of a response's first choice."""
    return response.text, (response.choices[0].finish_reason if response.choices else "unknown") or "unknown"


async def ask(model: ChatModel, cfg: RepairConfig, system: str, user: str, *, max_tokens: int, seed: int,
              temperature: float | None = None, stop: list[str] | None = None) -> tuple[str, str]:
    request = ChatRequest(
        messages=[Message.system(system), Message.user(user)],
        temperature=cfg.temperature if temperature is None else temperature,
        seed=seed,
        max_tokens=max_tokens,
        stop=stop or [],
    )
    return first_text(await model.chat(request))


def code_block(text: str) -> str | None:
    """The first fenced code block of an answer (or None)."""
    match = re.search(r"```(?:python|py)?[^\n]*\n(.*?)(?:```|\Z)", text, re.DOTALL)
    return match.group(1).strip() + "\n" if match and match.group(1).strip() else None


async def make_plan(model: ChatModel, cfg: RepairConfig, issue: str, sources: Mapping[str, str], *, seed: int) -> str:
    """The planner's short plan: which function is wrong and what to change."""
    code, _ = code_windows(cfg, sources, issue, "", focus=0, budget_chars=cfg.max_prompt_chars // 2)
    values = {"issue": issue, "repo_map": repo_map(sources), "code": code}
    text, _ = await ask(model, cfg, cfg.prompts.helper_system, fill(cfg.prompts.plan, values),
                        max_tokens=min(cfg.max_tokens, 200), seed=seed, temperature=0.0)
    return text.strip()[:1200]


async def critique(model: ChatModel, cfg: RepairConfig, issue: str, patch: str, test_output: str, *, seed: int) -> str:
    """The critic's review of a candidate that did not pass: what is wrong and what to try instead."""
    values = {"issue": issue, "patch": patch[:3000], "tests": test_output[:2000] or "(no test output)"}
    text, _ = await ask(model, cfg, cfg.prompts.helper_system, fill(cfg.prompts.critique, values),
                        max_tokens=min(cfg.max_tokens, 200), seed=seed, temperature=0.0)
    return text.strip()[:1000]


async def write_reproduction(
    model: ChatModel, cfg: RepairConfig, issue: str, sources: Mapping[str, str], *, seed: int,
    previous: tuple[str, str] | None = None,
) -> str | None:
    """A standalone script that fails while the bug is present (None when the answer holds no code).
    `previous` is an earlier try that did not count (script, output): the model sees why."""
    code, _ = code_windows(cfg, sources, issue, "", focus=0, budget_chars=cfg.max_prompt_chars // 2)
    before = ""
    if previous is not None:
        before = (f"An earlier script did not reproduce the issue:\n```python\n{previous[0][:1500]}```\n"
                  f"Its output:\n{previous[1][-800:] or '(it ran without error)'}\nWrite a corrected script.\n")
    values = {"issue": issue, "repo_map": repo_map(sources), "code": code, "previous": before}
    text, _ = await ask(model, cfg, cfg.prompts.helper_system, fill(cfg.prompts.reproduce, values),
                        max_tokens=cfg.max_tokens, seed=seed, temperature=0.2)
    return code_block(text)
