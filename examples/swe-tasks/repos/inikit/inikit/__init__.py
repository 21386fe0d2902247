"""inikit: INI-style configuration files with typed getters."""

from inikit.config import Config
from inikit.errors import ConversionError, InikitError, MissingOptionError, ParseError
from inikit.parser import load, loads

__all__ = [
    "Config",
    "ConversionError",
    "InikitError",
    "MissingOptionError",
    "ParseError",
    "load",
    "loads",
]
__version__ = "0.4.1"
