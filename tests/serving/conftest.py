"""Fixtures for tests that run a real llama-server with an embedded model.

They skip (reason printed with `pytest -rs`) when the binary or model is missing; set
AGENTFLOW_REQUIRE_LLAMA=1 (CI, after `agentflow serve setup`) to make that a failure instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from agentflow.serving.llamacpp import LlamaServerOptions, llamacpp_launch
from agentflow.serving.server import ServerHandle

SMALL = "gemma3-270m"


def llama_missing(model: str = SMALL) -> str | None:
    """Why llama tests cannot run here, or None."""
    from agentflow.serving.embedded import embedded_model
    from agentflow.serving.setup import _is_verified, find_llama_server, model_path

    if find_llama_server() is None:
        return "llama-server is not built (run: agentflow serve setup --models small)"
    if not _is_verified(embedded_model(model), model_path(model)):
        return f"local:{model} is not assembled (run: agentflow serve setup --models small)"
    return None


def require_llama(model: str = SMALL) -> None:
    reason = llama_missing(model)
    if reason is None:
        return
    if os.environ.get("AGENTFLOW_REQUIRE_LLAMA") == "1":
        pytest.fail(f"AGENTFLOW_REQUIRE_LLAMA=1 but {reason}")
    print(f"\nskipping llama test: {reason}")
    pytest.skip(reason)


def start_small(**options: object) -> ServerHandle:
    opts = LlamaServerOptions.model_validate({"model": SMALL, "parallel": 4, "ctx": 1024, **options})
    return ServerHandle(llamacpp_launch(opts, say=lambda m: None), port=opts.port).start_sync()


@pytest.fixture(scope="module")
def small_server() -> Iterator[ServerHandle]:
    require_llama()
    handle = start_small()
    try:
        yield handle
    finally:
        handle.stop_sync()
