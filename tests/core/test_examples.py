"""The example app's own test suite (`examples/testing/`, written with the test models, as a user would write
theirs) passes when run the way its README says: `pytest examples/testing`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "examples" / "testing"


def test_the_example_user_test_suite_passes() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(SUITE)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300,
        check=False,
    )
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 5 and "failed" not in summary, summary
