"""The router: routes in order, first match wins."""

from dataclasses import dataclass, field

from pathroute.errors import BuildError, MethodNotAllowed, NotFound
from pathroute.pattern import Pattern


@dataclass
class Route:
    pattern: Pattern
    endpoint: str
    methods: frozenset


@dataclass
class Match:
    endpoint: str
    params: dict = field(default_factory=dict)


class Router:
    def __init__(self):
        self.routes = []
        self._by_endpoint = {}

    def add(self, pattern, endpoint, methods=("GET",)):
        route = Route(Pattern(pattern), endpoint, frozenset(m.upper() for m in methods))
        self.routes.append(route)
        self._by_endpoint.setdefault(endpoint, route)
        return route

    def match(self, method, path):
        method = method.upper()
        for route in self.routes:
            params = route.pattern.match(path)
            if params is None:
                continue
            if method in route.methods or (method == "HEAD" and "GET" in route.methods):
                return Match(route.endpoint, params)
        raise NotFound(path)

    def url_for(self, endpoint, **params):
        route = self._by_endpoint.get(endpoint)
        if route is None:
            raise BuildError(f"no route named {endpoint!r}")
        try:
            return route.pattern.build(params)
        except KeyError as exc:
            raise BuildError(f"missing parameter {exc.args[0]!r} for {endpoint!r}") from None
        except ValueError as exc:
            raise BuildError(f"bad parameter for {endpoint!r}: {exc}") from None
