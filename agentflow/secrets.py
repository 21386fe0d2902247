"""Keep secrets out of logs, traces, events and checkpoints.

Values of credential-named variables (`*_API_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`, `*ACCESS_KEY*`,
`*PRIVATE_KEY*`, `*CREDENTIAL*`, ...), plus anything registered with `register_secret`, are replaced by `***`
in every string that `redact` sees, and so is the password of any URL (`postgresql://user:pw@host` ->
`postgresql://user:***@host`). Events, checkpoints and logs pass through `redact` before writing. Hot paths
call `redactor()` once per write instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

_SECRET_ENV = re.compile(
    r"(API_?KEY|ACCESS_?KEY|SECRET|PASSWORD|PASSWD|PRIVATE_?KEY|CREDENTIALS?|(^|_)TOKEN|(^|_)KEY$|_AUTH$|^AUTH_|DSN$)",
    re.IGNORECASE,
)
_URL_USERINFO = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)([^\s/@]*)@")
_TOKEN_USER = 16  # a user name without password this long is a token (`https://ghp_...@github.com`)
_extra: set[str] = set()
_MIN_LEN = 8  # shorter values would redact ordinary words

Redactor = Callable[[Any], Any]


def register_secret(value: str | None) -> None:
    """Treat `value` as a secret from now on (e.g. a generated server API key)."""
    global _cache
    if value and len(value) >= _MIN_LEN and value not in _extra:
        _extra.add(value)
        _cache = None


# (environment keys, (key, value) of the secret-named variables, redactor) as of the last scan
_cache: tuple[Any, tuple[tuple[Any, Any], ...], Redactor | None] | None = None


def redactor() -> Redactor | None:
    """A function that redacts every current secret (and URL passwords) from a value.

    Costs a microsecond or two while the environment and the registry are unchanged: they are rescanned only
    when a variable was added or removed, a secret-named one changed, or a secret was registered.
    """
    global _cache
    data = getattr(os.environ, "_data", None)  # the raw mapping; os.environ's public view decodes each item
    if not isinstance(data, dict):
        return _make_redactor(_scan())
    cache = _cache
    # Key-set equality catches an added variable; identity catches a re-set secret-named one.
    if cache is not None and data.keys() == cache[0] and all(data.get(k) is v for k, v in cache[1]):
        return cache[2]
    # Snapshot before scanning: a change in between is seen as a change on the next call, never missed.
    keys = set(data)
    watched = tuple((k, v) for k, v in data.items() if _SECRET_ENV.search(os.fsdecode(k)))
    result = _make_redactor(_scan())
    _cache = (keys, watched, result)
    return result


def redact(value: Any) -> Any:
    """Return `value` with every secret string replaced by `***` (recursing into lists, tuples and dicts)."""
    scrub = redactor()
    return scrub(value) if scrub is not None else value


def _scan() -> tuple[str, ...]:
    found = {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and v and len(v) >= _MIN_LEN}
    return tuple(sorted(found | _extra, key=len, reverse=True))  # longest first: a secret may contain another


def _hide_userinfo(match: re.Match[str]) -> str:
    user, sep, _ = match.group(2).partition(":")
    if sep:
        return f"{match.group(1)}{user}:***@"
    return f"{match.group(1)}***@" if len(user) >= _TOKEN_USER else match.group(0)


def _url_passwords(value: str) -> str:
    return _URL_USERINFO.sub(_hide_userinfo, value) if "://" in value and "@" in value else value


def _make_redactor(secrets: tuple[str, ...]) -> Redactor:
    def scrub(value: Any) -> Any:
        # Containers come back as the same object when nothing in them changed: no copy on the common path.
        if isinstance(value, str):
            for s in secrets:
                if s in value:
                    value = value.replace(s, "***")
            return _url_passwords(value)
        if isinstance(value, dict):
            out: dict[Any, Any] | None = None
            for k, v in value.items():
                new = scrub(v)
                if new is not v:
                    if out is None:
                        out = dict(value)
                    out[k] = new
            return value if out is None else out
        if isinstance(value, (list, tuple)):
            items = [scrub(v) for v in value]
            if all(new is old for new, old in zip(items, value, strict=True)):
                return value
            return tuple(items) if type(value) is tuple else items
        return value

    return scrub
