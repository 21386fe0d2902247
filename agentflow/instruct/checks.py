"""Programmatic checkers of verifiable instructions (in the spirit of IFEval, Zhou et al. 2023): each takes the
response and its parameters and says whether the constraint holds and, if not, why.

These grade only: a workflow never sees them (DeCRIM's critic writes its own checks from the constraint text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

Verdict = tuple[bool, str]


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9][A-Za-z0-9'’-]*", text)


def max_words(text: str, n: int) -> Verdict:
    count = len(_words(text))
    return count <= n, f"{count} words (at most {n})"


def min_words(text: str, n: int) -> Verdict:
    count = len(_words(text))
    return count >= n, f"{count} words (at least {n})"


def include_keywords(text: str, words: list[str]) -> Verdict:
    missing = [w for w in words if not re.search(rf"\b{re.escape(w)}\b", text, re.IGNORECASE)]
    return not missing, f"missing: {', '.join(missing)}" if missing else "all present"


def forbidden_words(text: str, words: list[str]) -> Verdict:
    found = [w for w in words if re.search(rf"\b{re.escape(w)}\b", text, re.IGNORECASE)]
    return not found, f"uses: {', '.join(found)}" if found else "none used"


def forbidden_chars(text: str, chars: str) -> Verdict:
    found = sorted({c for c in text if c in chars})
    return not found, f"contains {''.join(found)!r}" if found else "none present"


def _bullets(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if re.match(r"^\s*[-*•]\s+\S", ln)]


def bullets(text: str, n: int) -> Verdict:
    count = len(_bullets(text))
    return count == n, f"{count} bullet points (exactly {n})"


def _json_text(text: str) -> str:
    fenced = re.fullmatch(r"\s*```(?:json)?\s*\n(.*?)\n?```\s*", text, re.DOTALL)
    return fenced.group(1) if fenced else text


def json_keys(text: str, keys: list[str]) -> Verdict:
    try:
        data = json.loads(_json_text(text))
    except ValueError:
        return False, "the whole response is not one JSON value"
    if not isinstance(data, dict):
        return False, "the JSON value is not an object"
    missing = [k for k in keys if k not in data]
    return not missing, f"missing keys: {', '.join(missing)}" if missing else "all keys present"


def ends_with(text: str, phrase: str) -> Verdict:
    return text.strip().endswith(phrase), f"must end with {phrase!r}"


def starts_with(text: str, phrase: str) -> Verdict:
    return text.strip().startswith(phrase), f"must start with {phrase!r}"


def lowercase(text: str) -> Verdict:
    return text == text.lower(), "has capital letters" if text != text.lower() else "all lower case"


def uppercase(text: str) -> Verdict:
    return text == text.upper(), "has lower-case letters" if text != text.upper() else "all capitals"


def keyword_count(text: str, word: str, n: int) -> Verdict:
    count = len(re.findall(rf"\b{re.escape(word)}\b", text, re.IGNORECASE))
    return count >= n, f"{word!r} appears {count} times (at least {n})"


def paragraphs(text: str, n: int) -> Verdict:
    count = len([p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()])
    return count == n, f"{count} paragraphs (exactly {n}, separated by blank lines)"


def title(text: str) -> Verdict:
    found = re.search(r"<<[^<>\n]+>>", text)
    return found is not None, "has a <<title>>" if found else "no title in <<double angular brackets>>"


def max_sentences(text: str, n: int) -> Verdict:
    count = len([s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()])
    return count <= n, f"{count} sentences (at most {n})"


CHECKERS: dict[str, Callable[..., Verdict]] = {
    "max_words": max_words, "min_words": min_words, "include_keywords": include_keywords,
    "forbidden_words": forbidden_words, "forbidden_chars": forbidden_chars, "bullets": bullets,
    "json_keys": json_keys, "ends_with": ends_with, "starts_with": starts_with, "lowercase": lowercase,
    "uppercase": uppercase, "keyword_count": keyword_count, "paragraphs": paragraphs, "title": title,
    "max_sentences": max_sentences,
}
"""Checker kind -> function(response, **params)."""


def check(text: str, spec: dict[str, Any]) -> Verdict:
    """Run the checker `spec["kind"]` with the spec's other keys as parameters."""
    params = {k: v for k, v in spec.items() if k != "kind"}
    fn = CHECKERS.get(spec.get("kind", ""))
    if fn is None:
        raise ValueError(f"unknown checker {spec.get('kind')!r} (known: {', '.join(sorted(CHECKERS))})")
    return fn(text, **params)


__all__ = ["CHECKERS", "Verdict", "check"]
