"""Version range specifiers such as '>=1.2, <2' or '^1.4'."""

import operator
import re

from verspec.errors import InvalidSpecifier, InvalidVersion
from verspec.version import Version

_CLAUSE = re.compile(r"^(==|!=|>=|<=|>|<|\^|~)?\s*(.+)$")
_OPS = {
    "==": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}


def _loose(text):
    """Versions in specifiers may omit trailing parts: '2' means 2.0.0, '1.4' means 1.4.0."""
    core, sep, rest = text.partition("-")
    numbers = core.split(".")
    while len(numbers) < 3:
        numbers.append("0")
    return Version.parse(".".join(numbers) + sep + rest)


class Specifier:
    def __init__(self, text):
        self.text = text
        self.clauses = []
        for raw in text.split(","):
            raw = raw.strip()
            if not raw:
                continue
            match = _CLAUSE.match(raw)
            if match is None:
                raise InvalidSpecifier(f"invalid clause {raw!r} in {text!r}")
            op, version_text = match.group(1) or "==", match.group(2).strip()
            try:
                version = _loose(version_text)
            except InvalidVersion:
                raise InvalidSpecifier(f"invalid version {version_text!r} in {text!r}") from None
            self.clauses.extend(self._expand(op, version))
        if not self.clauses:
            raise InvalidSpecifier(f"empty specifier {text!r}")

    @staticmethod
    def _expand(op, version):
        if op == "^":
            upper = version.bump("major") if version.major > 0 else version.bump("minor")
            return [(">=", version), ("<", upper)]
        if op == "~":
            return [(">=", version), ("<", version.bump("minor"))]
        return [(op, version)]

    def contains(self, version):
        version = Version.parse(version)
        if version.is_prerelease and not any(v.is_prerelease for _, v in self.clauses):
            return False
        return all(_OPS[op](version, bound) for op, bound in self.clauses)

    def filter(self, versions):
        return [v for v in versions if self.contains(v)]

    def __str__(self):
        return self.text
