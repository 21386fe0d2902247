"""Error types shared by every layer.

A `UserError` is something the user can fix (bad input, bad config, missing dependency); the CLI prints
its message on one line and exits with code 2. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable


class AgentflowError(Exception):
    """Base class of every error agentflow raises on purpose."""


class UserError(AgentflowError):
    """A mistake the user can fix. The message names the problem and the fix, on one line."""

    exit_code: int = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.hint = hint
        super().__init__(message if hint is None else f"{message} ({hint})")


class ConfigError(UserError):
    """A configuration file or `-c key=value` override is invalid."""


class DependencyMissing(UserError):
    """An optional dependency is needed for what was asked; the message says which extra to install."""

    def __init__(self, package: str, extra: str, what: str) -> None:
        super().__init__(f"{what} needs the '{package}' package: pip install 'agentflow[{extra}]'")


class ModelError(AgentflowError):
    """A model backend failed in a way that is not the user's input (after retries where they apply)."""


class ReplayMiss(UserError):
    """A replayed run asked for a model call that the cassette does not hold."""


class ToolError(AgentflowError):
    """A tool failed; the agent loop turns it into a tool result the model can read."""


class SandboxError(AgentflowError):
    """The sandbox could not do what was asked (the container died, the agent stopped answering)."""


class NodeFailed(AgentflowError):
    """A workflow node failed (its agent ended without an answer, or it raised): the run ends `failed` with
    the node, the reason (`error`, `step_limit`, `budget:usd`, ...) and the error, unless the node routes
    its failures with `on_error:`."""

    def __init__(self, node: str, reason: str, error: str = "") -> None:
        self.node, self.reason, self.error = node, reason, error
        super().__init__(f"node '{node}' failed ({reason})" + (f": {error}" if error else ""))


def did_you_mean(name: object, choices: Iterable[object], sep: str = "; ") -> str:
    """`; did you mean 'task'?` naming the choice nearest to `name` (difflib, case-insensitive), or '' when no
    choice is near: appended to a message about an unknown name, so a typo shows its fix."""
    import difflib

    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(str(choice).lower(), str(choice))
    found = difflib.get_close_matches(str(name).lower(), list(by_lower), n=1, cutoff=0.6)
    return f"{sep}did you mean '{by_lower[found[0]]}'?" if found else ""


def public_names(obj: object) -> list[str]:
    """The attribute names of `obj` a user would write (no `_` first): the choices of `did_you_mean` for a
    `module:name` that is not there."""
    return [name for name in dir(obj) if not name.startswith("_")]


_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
"""Control characters (ESC, CR, BEL...), format characters (bidi overrides, zero-width), lone surrogates (an
undecodable byte of a file name), private use, and line/paragraph separators."""


class _Escapes(dict[int, str]):
    """A `str.translate` table built as characters are met: each unsafe one to its escape, the rest to itself."""

    def __init__(self, keep: str) -> None:
        super().__init__()
        self.keep = keep

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        if ch in self.keep or unicodedata.category(ch) not in _UNSAFE_CATEGORIES:
            value = ch
        else:
            value = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
        self[code] = value
        return value


_FIELD = _Escapes(keep="")
_LINES = _Escapes(keep="\n\t")


def printable(text: str, *, lines: bool = False) -> str:
    """`text` safe to print on a terminal: control and invisible characters written as escapes (`\\x1b`,
    `\\u202e`), so a name from a file can neither move the cursor, recolour, retitle the terminal, reorder
    what follows (bidi) nor, unless `lines`, start a line of its own. Every CLI write goes through it
    (`cli/main.py` wraps stdout and stderr); call it on a single-line field (a file name, an id) yourself."""
    return text.translate(_LINES if lines else _FIELD)
