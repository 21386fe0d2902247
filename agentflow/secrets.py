"""Keep secrets out of logs, traces, events and checkpoints.

Values of well-known credential variables, plus anything registered with `register_secret`, are replaced
by `***` in every string that `redact` sees. Events and checkpoints pass through `redact` before writing.
"""

from __future__ import annotations

import os
import re
from typing import Any

_SECRET_ENV = re.compile(r"(API_KEY|_TOKEN|_SECRET|PASSWORD)$", re.IGNORECASE)
_extra: set[str] = set()
_MIN_LEN = 8  # shorter values would redact ordinary words


def register_secret(value: str | None) -> None:
    """Treat `value` as a secret from now on (e.g. a generated server API key)."""
    if value and len(value) >= _MIN_LEN:
        _extra.add(value)


_cache: tuple[object, list[str]] | None = None


def _secrets() -> list[str]:
    # Scanning the environment costs ~100 us per call; rescan only when it (or the registry) changed.
    global _cache
    data = getattr(os.environ, "_data", None)
    key = (hash(frozenset(data.items())), len(_extra)) if isinstance(data, dict) else None
    if key is not None and _cache is not None and _cache[0] == key:
        return _cache[1]
    found = {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and v and len(v) >= _MIN_LEN}
    result = sorted(found | _extra, key=len, reverse=True)
    _cache = (key, result)
    return result


def redact(value: Any) -> Any:
    """Return `value` with every secret string replaced by `***` (recursing into lists and dicts)."""
    secrets = _secrets()
    if not secrets:
        return value
    return _redact(value, secrets)


def _redact(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for s in secrets:
            if s in value:
                value = value.replace(s, "***")
        return value
    if isinstance(value, dict):
        return {k: _redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v, secrets) for v in value]
    return value
