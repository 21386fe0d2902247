"""The runnable example of docs/concepts/tools.md stays true."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "tools.md"


def test_concept_doc_example_runs_and_prints_what_it_says() -> None:
    text = DOC.read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert code is not None
    proc = subprocess.run(
        [sys.executable, "-c", code.group(1)], check=False, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    lines = code.group(1).splitlines()
    promised = []  # each print's expected output: its trailing comment, or the comment line below it
    for i, line in enumerate(lines):
        if "print(" in line:
            comment = line if "# " in line else lines[i + 1]
            promised.append(comment.split("# ", 1)[1].strip())
    assert [line.strip() for line in proc.stdout.splitlines()] == promised
