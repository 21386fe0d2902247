"""Route patterns such as '/users/<int:user_id>/posts/<slug>'."""

import re

from pathroute.converters import CONVERTERS

_PLACEHOLDER = re.compile(r"<(?:(?P<conv>[a-z]+):)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)>")


class Pattern:
    def __init__(self, text):
        if not text.startswith("/"):
            raise ValueError(f"pattern must start with '/': {text!r}")
        self.text = text
        self.converters = {}
        regex, pos = "", 0
        for m in _PLACEHOLDER.finditer(text):
            regex += re.escape(text[pos : m.start()])
            conv_name = m.group("conv") or "str"
            if conv_name not in CONVERTERS:
                raise ValueError(f"unknown converter {conv_name!r} in {text!r}")
            name = m.group("name")
            if name in self.converters:
                raise ValueError(f"duplicate placeholder {name!r} in {text!r}")
            conv = CONVERTERS[conv_name]()
            self.converters[name] = conv
            regex += f"(?P<{name}>{conv.regex})"
            pos = m.end()
        regex += re.escape(text[pos:])
        self.regex = re.compile(f"^{regex}$")

    def match(self, path):
        m = self.regex.match(path)
        if m is None:
            return None
        return {name: self.converters[name].to_python(text) for name, text in m.groupdict().items()}

    def build(self, params):
        missing = set(self.converters) - set(params)
        if missing:
            raise KeyError(sorted(missing)[0])

        def fill(m):
            return str(params[m.group("name")])

        return _PLACEHOLDER.sub(fill, self.text)
