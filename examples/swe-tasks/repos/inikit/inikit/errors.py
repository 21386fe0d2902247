"""Exceptions raised by inikit."""


class InikitError(Exception):
    """Base class for every inikit error."""


class ParseError(InikitError):
    """The text is not valid INI syntax."""

    def __init__(self, message, lineno):
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


class MissingOptionError(InikitError, KeyError):
    """A section or option was asked for that the file does not define."""


class ConversionError(InikitError, ValueError):
    """A value could not be converted to the requested type."""
