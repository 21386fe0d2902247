"""Turn INI text into a `Config`."""

from inikit.config import Config
from inikit.errors import ParseError
from inikit.values import normalize_name

COMMENT_PREFIXES = ("#", ";")


def loads(text, *, default_section="general"):
    """Parse INI text. Options before the first section header go to `default_section`."""
    sections = {}
    current = normalize_name(default_section)
    last_key = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(COMMENT_PREFIXES):
            continue
        if line[:1].isspace() and last_key is not None:
            # continuation line: append to the previous value
            sections[current][last_key] += "\n" + stripped
            continue
        if stripped.startswith("["):
            if not stripped.endswith("]"):
                raise ParseError("unterminated section header", lineno)
            current = normalize_name(stripped[1:-1])
            if not current:
                raise ParseError("empty section name", lineno)
            sections.setdefault(current, {})
            last_key = None
            continue
        if "=" not in stripped:
            raise ParseError(f"expected 'key = value', got {stripped!r}", lineno)
        parts = stripped.split("=")
        key, value = normalize_name(parts[0]), parts[1].strip()
        if not key:
            raise ParseError("empty option name", lineno)
        sections.setdefault(current, {})[key] = value
        last_key = key
    return Config(sections)


def load(path, **kwargs):
    with open(path, encoding="utf-8") as fh:
        return loads(fh.read(), **kwargs)
