"""tabkit: plain-text tables."""

from tabkit.render import render
from tabkit.text import truncate

__all__ = ["render", "truncate"]
__version__ = "1.2.0"
