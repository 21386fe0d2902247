"""The runnable example in docs/concepts/models.md stays true."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "models.md"


def test_concept_doc_example_runs() -> None:
    text = DOC.read_text(encoding="utf-8")
    example = re.search(r"## Example.*?```python\n(.*?)\n```\n", text, re.DOTALL)
    assert example is not None
    proc = subprocess.run(
        [sys.executable, "-c", example.group(1)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["ok=True reason='tests pass'", "42 model.call"]
