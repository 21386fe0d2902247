"""Bearer-token protection of the HTTP transport: a token made once per start (or taken from the
environment), written to a 0600 file, checked in constant time on every request."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path
from typing import Any

TOKEN_ENV = "AGENTFLOW_MCP_TOKEN"
"""Environment variable that supplies the token instead of generating one."""


def make_token() -> tuple[str, bool]:
    """(token, generated): the token from `AGENTFLOW_MCP_TOKEN`, else a fresh random one (256 bits)."""
    given = os.environ.get(TOKEN_ENV)
    return (given, False) if given else (secrets.token_urlsafe(32), True)


def write_token(path: Path, token: str) -> None:
    """Write the token readable by its owner only (created 0600, never world-readable for a moment)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")


def bearer_credentials(header: bytes) -> bytes | None:
    """The credentials of an `Authorization: Bearer <token>` header, None for another scheme or none. The
    scheme is case-insensitive and spaces separate it from the token (RFC 7235 section 2.1)."""
    scheme, _, credentials = header.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    return credentials.strip(b" ") or None


class BearerAuth:
    """ASGI middleware: HTTP requests without `Authorization: Bearer <token>` (the scheme in any case) get
    401; lifespan passes."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            given = bearer_credentials(dict(scope.get("headers") or []).get(b"authorization", b""))
            if given is None or not hmac.compare_digest(given, self._expected):
                await _unauthorized(send)
                return
        await self.app(scope, receive, send)


async def _unauthorized(send: Any) -> None:
    body = b'{"error":"unauthorized: send Authorization: Bearer <token>"}'
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b'Bearer realm="agentflow-mcp"'),
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})
