"""verspec: semantic versions and range specifiers."""

from verspec.errors import InvalidSpecifier, InvalidVersion, VerspecError
from verspec.specifier import Specifier
from verspec.version import Version

__all__ = ["InvalidSpecifier", "InvalidVersion", "Specifier", "Version", "VerspecError"]
__version__ = "2.0.3"
