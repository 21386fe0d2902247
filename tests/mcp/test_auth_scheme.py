"""The MCP server's bearer check over a real HTTP server on loopback: the `Bearer` scheme is accepted in any
case and with any run of spaces before the token (RFC 7235: the scheme is case-insensitive); another scheme,
another token, or the token alone is refused with 401."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentflow.mcp_server.auth import BearerAuth
from agentflow.serving.ports import pick_free_port

TOKEN = "tok-3f9a_Z"


async def _ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"in"})


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    import uvicorn

    port = pick_free_port()
    server = uvicorn.Server(uvicorn.Config(BearerAuth(_ok, TOKEN), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
@pytest.mark.parametrize("gap", [" ", "  ", "   "])
def test_the_bearer_scheme_in_any_case_is_accepted(url: str, scheme: str, gap: str) -> None:
    response = httpx.get(url, headers={"Authorization": f"{scheme}{gap}{TOKEN}"}, timeout=10)
    assert response.status_code == 200 and response.text == "in"


@pytest.mark.parametrize("header", [
    None, "", TOKEN, f"Basic {TOKEN}", f"Bearer{TOKEN}", "Bearer", f"Bearer {TOKEN}x",
    f"Bearer {TOKEN[:-1]}", f"bearer {TOKEN.upper()}", f"Bearer {TOKEN} extra", f"Token {TOKEN}",
])
def test_anything_else_is_refused(url: str, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    response = httpx.get(url, headers=headers, timeout=10)
    assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer ")
