"""Free loopback ports. Picking one is racy by nature (another process may take it before the server binds),
so the server start-up retries with a fresh port when the server reports a bind failure."""

from __future__ import annotations

import re
import socket

BIND_FAILURE = re.compile(r"address already in use|couldn't bind|could not bind|failed to bind|errno 98",
                          re.IGNORECASE)
"""Log text of llama-server (`couldn't bind HTTP server socket`) and uvicorn/vLLM (`[Errno 98] Address already in use`)."""


def pick_free_port(host: str = "127.0.0.1") -> int:
    """A port the OS considers free right now on `host`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on (host, port) and we could bind it ourselves."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True
