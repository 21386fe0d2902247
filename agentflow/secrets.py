"""Keep secrets out of logs, traces, events, checkpoints and every other file a run writes.

Values of credential-named variables (`*_API_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`, `*ACCESS_KEY*`,
`*PRIVATE_KEY*`, `*CREDENTIAL*`, ...), passwords of URLs in any variable, plus anything registered with
`register_secret`, are replaced by `***` in every string that `redact` sees, and so is the password of any URL
(`postgresql://user:pw@host` -> `postgresql://user:***@host`). Config resolution registers what a config holds
(`register_secrets_in`: `-c model_options.api_key=...`, a password in a model URL, a token in a config file),
so a secret given any way is known before the first file is written. Every writer of a run folder (events,
checkpoints, the call journal, run.json, config.resolved.yaml, preds, reports, logs, the viewer page) passes
its data through `redact`; hot paths call `redactor()` once per write instead. `redact` takes a value of any
type: what it does not walk (an exception, a pydantic model, a set, ...) is redacted as the JSON data or the
text it is written as. Checkpoints are redacted after serialization (`graph/persist/serde_redact.py`), printed output
line by line at `sys.stdout`/`sys.stderr` (`cli/_output.py`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from pydantic_core import to_jsonable_python

_SECRET_ENV = re.compile(
    r"(API_?KEY|ACCESS_?KEY|SECRET|PASSWORD|PASSWD|PRIVATE_?KEY|CREDENTIALS?|(^|_)TOKEN|(^|_)KEY$|_AUTH$|^AUTH_|DSN$)",
    re.IGNORECASE,
)
# Config keys that hold a secret (`api_key`, `openai_api_key`, `hf_token`, `password`, `client_secret`, an
# `Authorization` header), as whole words: not `max_tokens` or `tokenizer`; and not `api_key_env`,
# `bearer_token_env` or `token_file`, which say where a secret is.
_SECRET_KEY = re.compile(
    r"(^|[_.-])(api_?key|access_?key|secret|password|passwd|private_?key|token|credentials?|authorization)"
    r"([_.-]|$)",
    re.IGNORECASE,
)
_SECRET_KEY_NOT = re.compile(r"[_.-](env|file|path|var|name)s?$", re.IGNORECASE)
# The user info of a URL: never across whitespace or the delimiters of the formats a run writes (a JSON string's
# `"` and `\\`, HTML's `<` `>`), so masking a password in a JSON line or a page keeps it well formed.
_URL_USERINFO = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)([^\s/@\"\\<>]*)@")
_URL_USERINFO_BYTES = re.compile(_URL_USERINFO.pattern.encode())
_TOKEN_USER = 16  # a user name without password this long is a token (`https://ghp_...@github.com`)
_extra: set[str] = set()
_MIN_LEN = 8  # shorter values would redact ordinary words
MASK = "***"
"""What a secret is replaced by."""
CODE_KEYS = frozenset({"patch", "model_patch", "diff"})
"""Keys whose string value is code (a patch): only known secrets are redacted there, never a URL's password
by pattern: a URL with a password in a patch is what the code is about (a test of a URL parser), and the graded
patch must stay as written."""
_OVERRIDE = re.compile(r"^([\w-]+(?:\.[\w-]+)*)=(.+)$", re.DOTALL)
_MASKED_URL = re.compile(r"://([^\s/@:]*:)?\*\*\*@")

Redactor = Callable[[Any], Any]


def register_secret(value: str | None) -> None:
    """Treat `value` as a secret from now on (e.g. a generated server API key)."""
    global _cache
    if value and len(value) >= _MIN_LEN and value not in _extra:
        _extra.add(value)
        _cache = None


def is_secret_key(name: str) -> bool:
    """Whether a config key (`api_key`, `hf_token`, `db_password`, ...) names a value that is a secret."""
    return bool(_SECRET_KEY.search(name)) and not _SECRET_KEY_NOT.search(name)


def url_secrets(text: str) -> Iterator[str]:
    """The passwords (and token-like user names) of the URLs in `text`, as written and percent-decoded."""
    if "://" not in text or "@" not in text:
        return
    for match in _URL_USERINFO.finditer(text):
        user, sep, password = match.group(2).partition(":")
        secret = password if sep else user if len(user) >= _TOKEN_USER else ""
        if secret:
            yield secret
            if unquote(secret) != secret:
                yield unquote(secret)


def register_secrets_in(value: Any, key: str = "") -> None:
    """Register every secret a config value holds: strings under credential-named keys (`is_secret_key`),
    and URL passwords in any string. Config validation calls it, so `-c`, config files and specs are covered."""
    if isinstance(value, str):
        override = _OVERRIDE.match(value)  # a `-c key=value` item, as run.json records them
        if key and is_secret_key(key):
            register_secret(value)
        elif override and is_secret_key(override.group(1).rsplit(".", 1)[-1]):
            register_secret(override.group(2))
        for secret in url_secrets(value):
            register_secret(secret)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            register_secrets_in(v, str(k))
    elif isinstance(value, (list, tuple)):
        for v in value:
            register_secrets_in(v, key)


def masked(value: str) -> bool:
    """Whether `value` is a secret replaced by `redact` (`***`, or a URL whose password is `***`): a value
    read back from a run folder that must be given again to be used."""
    return value == MASK or bool(_MASKED_URL.search(value))


def masked_paths(value: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the `masked` strings in a config read back from a run folder (`model_options.api_key`)."""
    if isinstance(value, str):
        return [prefix] if masked(value) else []
    if isinstance(value, Mapping):
        return [p for k, v in value.items() for p in masked_paths(v, f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in masked_paths(v, f"{prefix}.{i}" if prefix else str(i))]
    return []


@dataclass(frozen=True)
class Redactors:
    """The current secrets as functions: `full` and `code` (see `redactor`), and `holds`, a quick test of
    serialized bytes (a known secret, or something like a URL with user info) before they are decoded."""

    full: Redactor
    code: Redactor
    holds: Callable[[bytes], bool]


# (environment keys, (key, value) of the secret-named variables, the redactors)
_cache: tuple[Any, tuple[tuple[Any, Any], ...], Redactors] | None = None


def redactor(*, urls: bool = True) -> Redactor:
    """A function that redacts every current secret (and URL passwords) from a value.

    `urls=False` leaves URLs that are not known secrets alone: for code (a patch; see `CODE_KEYS`, which
    dictionaries get anyway); known secrets are still redacted.
    Costs a few microseconds while the environment and the registry are unchanged: they are rescanned only
    when a variable was added or removed, a secret-named one changed, or a secret was registered.
    """
    current = redactors()
    return current.full if urls else current.code


def redactors() -> Redactors:
    """`redactor()` and `redactor(urls=False)` at once, with their bytes test (see `Redactors`)."""
    global _cache
    data = getattr(os.environ, "_data", None)  # the raw mapping; os.environ's public view decodes each item
    if not isinstance(data, dict):
        return _make_redactors(_scan())
    cache = _cache
    # Key-set equality catches an added variable; identity catches a re-set secret-named one.
    if cache is not None and data.keys() == cache[0] and all(data.get(k) is v for k, v in cache[1]):
        return cache[2]
    # Snapshot before scanning: a change in between is seen as a change on the next call, never missed.
    keys = set(data)
    watched = tuple((k, v) for k, v in data.items() if _SECRET_ENV.search(os.fsdecode(k)))
    current = _make_redactors(_scan())
    _cache = (keys, watched, current)
    return current


def _make_redactors(secrets: tuple[str, ...]) -> Redactors:
    needles = tuple({s.encode("utf-8", "surrogateescape") for s in secrets})

    def holds(data: bytes) -> bool:
        if any(n in data for n in needles):
            return True
        return b"://" in data and b"@" in data and _URL_USERINFO_BYTES.search(data) is not None

    return Redactors(_make_redactor(secrets, True), _make_redactor(secrets, False), holds)


def redact(value: Any, *, urls: bool = True) -> Any:
    """Return `value` with every secret string replaced by `***` (recursing into lists, tuples and dicts);
    `urls=False` for code: see `redactor`."""
    return redactor(urls=urls)(value)


def _scan() -> tuple[str, ...]:
    found = {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and v and len(v) >= _MIN_LEN}
    # a URL's password in any variable (DATABASE_URL, OPENAI_BASE_URL, ...), also outside its URL
    found |= {s for v in os.environ.values() for s in url_secrets(v) if len(s) >= _MIN_LEN}
    found |= _extra
    found |= {json.dumps(s)[1:-1] for s in found}  # as a JSON string holds it (`"` and non-ASCII escaped)
    return tuple(sorted(found, key=len, reverse=True))  # longest first: a secret may contain another


def _hide_userinfo(match: re.Match[str]) -> str:
    user, sep, _ = match.group(2).partition(":")
    if sep:
        return f"{match.group(1)}{user}:{MASK}@"
    return f"{match.group(1)}{MASK}@" if len(user) >= _TOKEN_USER else match.group(0)


def _url_passwords(value: str) -> str:
    return _URL_USERINFO.sub(_hide_userinfo, value) if "://" in value and "@" in value else value


def _make_redactor(secrets: tuple[str, ...], urls: bool = True) -> Redactor:
    def known(value: str) -> str:
        for s in secrets:
            if s in value:
                value = value.replace(s, MASK)
        return value

    def code(value: Any) -> Any:
        return known(value) if isinstance(value, str) else scrub(value)

    def scrub(value: Any) -> Any:
        # Containers come back as the same object when nothing in them changed: no copy on the common path.
        if isinstance(value, str):
            return _url_passwords(known(value)) if urls else known(value)
        if isinstance(value, dict):
            out: dict[Any, Any] | None = None
            for k, v in value.items():
                new = code(v) if k in CODE_KEYS else scrub(v)
                key = scrub(k) if isinstance(k, str) else k  # a key is written as much as its value
                if new is not v or key != k:
                    if out is None:
                        out = dict(value)
                    if key != k:
                        del out[k]
                    out[key] = new
            return value if out is None else out

        if isinstance(value, (list, tuple)):
            items = [scrub(v) for v in value]
            if all(new is old for new, old in zip(items, value, strict=True)):
                return value
            return tuple(items) if type(value) is tuple else items
        if value is None or isinstance(value, (bool, int, float)):
            return value
        if isinstance(value, (bytes, bytearray)):
            text = value.decode("utf-8", "surrogateescape")
            clean = scrub(text)
            return value if clean == text else clean.encode("utf-8", "surrogateescape")
        # Any other type (an exception, a pydantic model, a dataclass, a set, a Path, ...) as the JSON data it
        # is written as, else as its text: no type is passed through unredacted.
        try:
            plain = to_jsonable_python(value, fallback=_text)
        except (ValueError, TypeError, RecursionError):  # a circular reference, a model that fails to dump
            plain = _text(value)
        return scrub(plain)

    return scrub


def _text(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - a broken __str__ must not stop a write; the type name holds no secret
        return f"<{type(value).__name__}>"
