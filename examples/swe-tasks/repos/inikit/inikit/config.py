"""The parsed configuration and its typed getters."""

from inikit import values
from inikit.errors import MissingOptionError

_MISSING = object()


class Config:
    def __init__(self, sections=None):
        self._sections = {
            values.normalize_name(name): {values.normalize_name(k): v for k, v in options.items()}
            for name, options in (sections or {}).items()
        }

    def sections(self):
        return list(self._sections)

    def has_option(self, section, option):
        return values.normalize_name(option) in self._sections.get(values.normalize_name(section), {})

    def get(self, section, option, default=_MISSING):
        options = self._sections.get(values.normalize_name(section))
        if options is None:
            if default is not _MISSING:
                return default
            raise MissingOptionError(f"no section {section!r}")
        key = values.normalize_name(option)
        if key not in options:
            if default is not _MISSING:
                return default
            raise MissingOptionError(f"no option {option!r} in section {section!r}")
        return options[key]

    def _typed(self, convert, section, option, default):
        raw = self.get(section, option, _MISSING if default is _MISSING else None)
        if raw is None:
            return default
        return convert(raw)

    def getint(self, section, option, default=_MISSING):
        return self._typed(values.to_int, section, option, default)

    def getfloat(self, section, option, default=_MISSING):
        return self._typed(values.to_float, section, option, default)

    def getbool(self, section, option, default=_MISSING):
        return self._typed(values.to_bool, section, option, default)

    def getlist(self, section, option, default=_MISSING, sep=","):
        return self._typed(lambda raw: values.to_list(raw, sep), section, option, default)

    def to_dict(self):
        return {name: dict(options) for name, options in self._sections.items()}
