"""Problem statements: built from the test files' frames only, and never naming the changed file or line."""

from __future__ import annotations

import pytest

from agentflow.synth.mutate import file_mutations
from agentflow.synth.statement import (
    behaviour_report,
    check_statement,
    failing_test_report,
    read_failure,
    scrub,
)

from .fixture import CORE

OUTPUT = """\
=================================== FAILURES ===================================
__________________________________ test_pad ____________________________________
tests/test_core.py:30: in test_pad
    assert pad("ab", 4) == "ab  "
minipkg/core.py:22: in pad
    if not (missing <= 0):
E   AssertionError: assert 'ab' == 'ab  '
E     <object at 0x7f3a2b1c4d50>
=========================== short test summary info ============================
FAILED tests/test_core.py::test_pad - AssertionError
"""


def test_package_frames_are_left_out() -> None:
    failure = read_failure("tests/test_core.py::test_pad", OUTPUT, {"tests/test_core.py"})
    assert failure is not None
    text = "\n".join(failure.frames)
    assert "minipkg/core.py" not in text and "missing <= 0" not in text
    assert failure.failing_line == 'assert pad("ab", 4) == "ab  "'
    assert behaviour_report(failure) is not None and "`pad('ab', 4)` gives `'ab'`" in behaviour_report(failure)


# every mutation of the fixture, with a report that quotes its changed line and path: scrub removes them all
@pytest.mark.parametrize("mutation", file_mutations("minipkg/core.py", CORE), ids=lambda m: m.key)
def test_scrub_removes_every_changed_line_and_path(mutation) -> None:  # type: ignore[no-untyped-def]
    forbidden = [mutation.path, *mutation.old_lines, *mutation.new_lines]
    output = OUTPUT.replace("    if not (missing <= 0):", mutation.old_lines[0]).replace("minipkg/core.py", mutation.path)
    failure = read_failure("tests/test_core.py::test_pad", output + "\n", {"tests/test_core.py", mutation.path})
    assert failure is not None
    report = failing_test_report([failure], mutation.old_lines[0] + "\n" + "\n".join(mutation.new_lines), ["t::x"])
    assert not check_statement(report, forbidden)  # the raw report names them (the test is not vacuous)
    clean = scrub(report, forbidden)
    assert check_statement(clean, forbidden)
    assert "0x7f3a" not in clean


# a changed file's path, and the test files whose names contain it as text without naming it as a path
CHANGED = ["xmltodict.py", "core.py", "minipkg/core.py", "src/minipkg/core.py"]


@pytest.mark.parametrize("path", CHANGED)
def test_a_path_is_forbidden_as_a_path_not_inside_a_test_files_name(path: str) -> None:
    stem = path.rsplit("/", 1)[-1].removesuffix(".py")
    tests = [f"tests/test_{stem}.py", f"tests/{stem}_test.py", f"test_{stem}.py", f"tests/unit/my{stem}.py",
             f"tests/{stem}.pyi_cases/test_x.py"]
    naming = [f"{path}:22: in pad", f'  File "/workspace/{path}", line 3, in pad', f"see {path}",
              f"({path})", f"E   ./{path}:9: error"]
    report = "\n".join([*(f"- `{t}::test_pad` fails" for t in tests), *naming])
    clean = scrub(report, [path])
    assert clean.split("\n") == [f"- `{t}::test_pad` fails" for t in tests]  # every test id kept, in order
    assert check_statement(clean, [path]) and not check_statement(report, [path])
    assert all(not check_statement(line, [path]) for line in naming)
