"""The docs' block collector and its loopback model: what test_docs_snippets.py relies on to run the docs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentflow.agents import Agent, Plan
from agentflow.models import load_model
from tests.core.docs_blocks import Block, commands, page_blocks
from tests.core.docs_model_server import serving

PAGE = """# A page

<!-- doc-test: skip (needs a GPU) -->
```bash
agentflow serve vllm X
```

<!-- doc-test: skip -->
```bash
agentflow run demo
```

<!-- doc-test: skip () -->
```python
print(1)
```

<!-- doc-test: requires docker, gpu -->
```bash
agentflow run demo
```

```
untagged
```

<!-- doc-test: requires llama -->
```console
$ agentflow run demo \\
    --input '{"topic": "x"}'
output line
$ for i in 1 2; do
>   echo $i
> done
```

```bash
agentflow run x -m local:qwen2.5-coder-1.5b   # the embedded model
echo "openai"  # not local: a comment
```
"""


@pytest.fixture
def page(tmp_path: Path) -> list[Block]:
    path = tmp_path / "page.md"
    path.write_text(PAGE)
    return page_blocks(path)


def test_a_skip_needs_a_reason_and_markers_are_checked(page: list[Block]) -> None:
    gpu, no_reason, empty_reason, unknown, untagged, console, local = page
    assert gpu.skip_reason == "needs a GPU" and not gpu.problems
    for block in (no_reason, empty_reason):
        assert block.skip_reason is None and "needs a reason" in block.problems[0]
    assert "unknown 'doc-test: requires docker, gpu'" in unknown.problems[0]
    assert untagged.problems == ("the fence names no language (```bash, ```python, ```text, ...)",)
    assert console.requires() == ["llama"] and not console.problems
    assert local.requires() == ["llama"]


def test_commands_are_whole_shell_commands(page: list[Block]) -> None:
    console, local = page[5], page[6]
    assert commands(console) == [
        "agentflow run demo \\\n    --input '{\"topic\": \"x\"}'",
        "for i in 1 2; do\n  echo $i\ndone",
    ]
    assert commands(local) == [
        "agentflow run x -m local:qwen2.5-coder-1.5b   # the embedded model",
        'echo "openai"  # not local: a comment',
    ]


def test_a_comment_naming_a_model_does_not_ask_for_it(tmp_path: Path) -> None:
    path = tmp_path / "page.md"
    path.write_text('```python\nmodel = load_model("test")  # or "local:qwen2.5-coder-1.5b"\n```\n')
    (block,) = page_blocks(path)
    assert block.requires() == []


def test_a_hosted_model_answers_from_the_test_model_in_its_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    with serving() as url:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-loopback")

        async def plan() -> tuple[str, object]:
            model = load_model("openai:gpt-4o-mini", max_attempts=1)
            try:
                result = await Agent("planner", model=model).run("Add a --verbose flag")
                return result.stop_reason, result.output
            finally:
                await model.aclose()

        stop_reason, output = asyncio.run(plan())
    assert stop_reason == "done", output
    assert isinstance(output, Plan) and output.steps
