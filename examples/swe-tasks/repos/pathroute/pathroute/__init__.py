"""pathroute: URL routing."""

from pathroute.errors import BuildError, MethodNotAllowed, NotFound, RoutingError
from pathroute.router import Match, Router

__all__ = ["BuildError", "Match", "MethodNotAllowed", "NotFound", "Router", "RoutingError"]
__version__ = "0.3.0"
