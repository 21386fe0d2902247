"""A local model's first call says it is working (not minutes of silence); later calls do not repeat it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.serving.conftest import require_llama

ROOT = Path(__file__).resolve().parents[2]

APP = textwrap.dedent(
    """
    import asyncio
    from agentflow.models import ChatRequest, Message, load_model

    async def main():
        model = load_model("local:gemma3-270m")
        try:
            for _ in range(2):
                await model.chat(ChatRequest(messages=[Message.user("Say hi.")], max_tokens=4))
        finally:
            await model.aclose()

    asyncio.run(main())
    """
)


@pytest.mark.llama
def test_first_local_call_is_announced_once() -> None:
    require_llama()
    proc = subprocess.run([sys.executable, "-c", APP], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("first call; the model is reading the prompt") == 1, proc.stderr
