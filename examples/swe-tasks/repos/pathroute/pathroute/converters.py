"""Converters: how a typed placeholder matches a path segment and turns into a Python value."""

from urllib.parse import quote, unquote


class StrConverter:
    regex = r"[^/]+"

    def to_python(self, text):
        return unquote(text)

    def to_url(self, value):
        return str(value)


class IntConverter(StrConverter):
    regex = r"\d+"

    def to_python(self, text):
        return int(text)

    def to_url(self, value):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"expected a non-negative int, got {value!r}")
        return str(value)


class SlugConverter(StrConverter):
    regex = r"[a-z0-9]+(?:-[a-z0-9]+)*"


class PathConverter(StrConverter):
    regex = r"[^/]+"

    def to_url(self, value):
        return quote(str(value), safe="/")


CONVERTERS = {
    "str": StrConverter,
    "int": IntConverter,
    "slug": SlugConverter,
    "path": PathConverter,
}
