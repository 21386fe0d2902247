class RoutingError(Exception):
    status = 500


class NotFound(RoutingError):
    status = 404


class MethodNotAllowed(RoutingError):
    status = 405

    def __init__(self, allowed):
        super().__init__(f"method not allowed; allowed: {', '.join(sorted(allowed))}")
        self.allowed = set(allowed)


class BuildError(RoutingError):
    """A URL cannot be built (unknown endpoint or missing/invalid parameter)."""
