class VerspecError(ValueError):
    """Base class of verspec's errors."""


class InvalidVersion(VerspecError):
    """The string is not a semantic version."""


class InvalidSpecifier(VerspecError):
    """The string is not a valid range specifier."""
