"""Semantic versions."""

import functools
import re

from verspec.errors import InvalidVersion

_PATTERN = re.compile(
    r"^v?(?P<core>[0-9][0-9.]*)"
    r"(?:-(?P<pre>[0-9A-Za-z.-]+))?"
    r"(?:\+(?P<build>[0-9A-Za-z.-]+))?$"
)


def _pre_key(pre):
    """Order pre-release identifiers: numeric ones numerically and before alphanumeric ones."""
    parts = []
    for ident in pre.split("."):
        parts.append((0, int(ident), "") if ident.isdigit() else (1, 0, ident))
    return tuple(parts)


@functools.total_ordering
class Version:
    __slots__ = ("major", "minor", "patch", "pre", "build")

    def __init__(self, major, minor=0, patch=0, pre="", build=""):
        self.major, self.minor, self.patch = int(major), int(minor), int(patch)
        self.pre, self.build = pre or "", build or ""

    @classmethod
    def parse(cls, text):
        if isinstance(text, Version):
            return text
        match = _PATTERN.match(text.strip())
        if match is None:
            raise InvalidVersion(f"invalid version: {text!r}")
        numbers = match.group("core").split(".")
        return cls(numbers[0], numbers[1], numbers[2], match.group("pre"), match.group("build"))

    @property
    def is_prerelease(self):
        return bool(self.pre)

    def release(self):
        """The version without pre-release and build tags."""
        return Version(self.major, self.minor, self.patch)

    def bump(self, part):
        """Next version for `part` ('major', 'minor' or 'patch'); lower parts reset to 0."""
        if part == "major":
            return Version(self.major + 1, 0, 0)
        if part == "minor":
            return Version(self.major, self.minor + 1, self.patch)
        if part == "patch":
            return Version(self.major, self.minor, self.patch + 1)
        raise ValueError(f"unknown part {part!r}")

    def _key(self):
        return (self.major, self.minor, self.patch, _pre_key(self.pre) if self.pre else ())

    def __eq__(self, other):
        if isinstance(other, str):
            other = Version.parse(other)
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other):
        if isinstance(other, str):
            other = Version.parse(other)
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self):
        return hash(self._key())

    def __str__(self):
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += f"-{self.pre}"
        if self.build:
            text += f"+{self.build}"
        return text

    def __repr__(self):
        return f"Version({str(self)!r})"
