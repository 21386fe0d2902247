"""The procedural operators: every mutation of real source files is one changed line of one function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agentflow.pysyntax import parsed
from agentflow.synth.layout import source_files, suite_files
from agentflow.synth.mutate import OPERATORS, REPAIR_OPERATORS, _functions, file_mutations
from agentflow.synth.rewrite import model_rewrites, rewritten

from .fixture import CORE, write_repo

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "examples" / "real-tasks" / "repos"
SOURCES = {
    "fixture": CORE,
    **{f"{r}:{p}": (REAL / r / p).read_text() for r, p in [
        ("toolz-1", "toolz/itertoolz.py"), ("semver-1", "src/semver/version.py"),
        ("inflection-1", "inflection/__init__.py"), ("six-1", "six.py"),
    ]},
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_mutation_changes_one_line_of_its_function_and_the_tree(name: str) -> None:
    text = SOURCES[name]
    original = ast.dump(ast.parse(text))
    mutations = file_mutations("pkg/mod.py", text)
    assert mutations, "no candidates at all"
    owners: dict[str, list[tuple[int, int]]] = {}
    for qualname, f in _functions(ast.parse(text)):
        owners.setdefault(qualname, []).append((f.lineno, f.end_lineno or f.lineno))
    before = text.splitlines()
    for m in mutations[:: max(1, len(mutations) // 120)]:  # an even sample keeps a large file's check short
        changed = m.apply(text)
        assert ast.dump(ast.parse(changed)) != original, m
        after = changed.splitlines()
        assert m.start == m.end and len(m.new_lines) <= 1 and before[m.start - 1] == m.old_lines[0], m
        assert after[: m.start - 1] == before[: m.start - 1], m
        assert after[m.start - 1 + len(m.new_lines) :] == before[m.end :], m
        assert m.new_lines != m.old_lines
        assert any(first <= m.start <= last for first, last in owners[m.function]), m
        assert m.operator in OPERATORS


def test_every_operator_family_has_candidates_in_the_real_sources() -> None:
    found = {m.operator for text in SOURCES.values() for m in file_mutations("m.py", text)}
    assert found == set(OPERATORS)


def test_mutations_are_a_function_of_the_text() -> None:
    for text in SOURCES.values():
        assert file_mutations("m.py", text) == file_mutations("m.py", text)


UNDONE = ("flip-comparison", "off-by-one", "swap-boolean", "negate-condition", "swap-arguments")
"""The injected one-token faults the repair's changes (`REPAIR_OPERATORS`) must undo: the others remove or
replace what no single-site change can guess back (a statement, a returned value, a default)."""


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_one_token_fault_is_undone_by_one_repair_change(name: str) -> None:
    """The class, generated: for an even sample (ten) of the injected faults of the `UNDONE` families in real
    sources, one of the repair changes of the faulty line gives back the original syntax tree, and every repair
    change stays in its function."""
    text = SOURCES[name]
    original = ast.dump(ast.parse(text))
    faults = file_mutations("m.py", text, UNDONE)
    assert faults
    for fault in faults[:: max(1, len(faults) // 10)]:  # each check enumerates the whole file again: seconds
        broken = fault.apply(text)
        changes = [m for m in file_mutations("m.py", broken, REPAIR_OPERATORS) if m.start == fault.start]
        assert any(ast.dump(ast.parse(m.apply(broken))) == original for m in changes), (fault, changes)
        assert all(m.function == fault.function and m.operator in REPAIR_OPERATORS for m in changes)


def test_repair_changes_shift_bounds_with_the_precedence_kept() -> None:
    text = ("def f(xs, w, n):\n    a = '-' * w + ':'\n    b = xs[: n - 1]\n    if self_n > 0:\n"
            "        n += 1\n    return len(xs) - n\n")
    lines = {line for m in file_mutations("m.py", text, REPAIR_OPERATORS) for line in m.new_lines}
    assert "    a = '-' * (w - 1) + ':'" in lines  # not `'-' * w - 1`: a shifted factor is parenthesized
    assert "    b = xs[: n]" in lines and "    b = xs[: n - 0]" not in lines  # drop-one, never `- 0`
    assert "        n -= 1" in lines and "    return len(xs) + n" in lines and "    if self_n >= 0:" in lines
    assert "    if self_n > -1:" in lines and "    if self_n > 1:" in lines


def test_operator_choice_limits_the_families() -> None:
    only = file_mutations("m.py", CORE, ("swap-boolean",))
    assert only and {m.operator for m in only} == {"swap-boolean"}


@pytest.mark.parametrize("src_layout", [False, True])
def test_layout_finds_the_package_never_tests_or_tooling(tmp_path: Path, src_layout: bool) -> None:
    repo = write_repo(tmp_path, src_layout=src_layout)
    (repo / "docs").mkdir()
    (repo / "docs" / "conf.py").write_text("x = 1\n")
    prefix = "src/" if src_layout else ""
    assert source_files(repo) == [f"{prefix}minipkg/__init__.py", f"{prefix}minipkg/core.py"]
    assert suite_files(["tests/test_core.py", "setup.py", "docs/conf.py", "a/b_test.py"]) == ["a/b_test.py", "tests/test_core.py"]


async def test_model_rewrites_become_candidates_only_when_they_change_the_same_function() -> None:
    texts = {"minipkg/core.py": CORE}
    made = await model_rewrites("function:tests.synth.fakes:flip_first_comparison", texts, 10, seed=3)
    assert made and all(m.operator == "model-rewrite" for m in made)
    for m in made:
        assert ast.dump(ast.parse(m.apply(CORE))) != ast.dump(ast.parse(CORE))
        assert any(" <= " in line or " >= " in line for line in m.new_lines)
    again = await model_rewrites("function:tests.synth.fakes:flip_first_comparison", texts, 10, seed=3)
    assert again == made
    assert await model_rewrites("function:tests.synth.fakes:rename", texts, 10, seed=3) == []
    assert rewritten("minipkg/core.py", "clamp", 4, 9, CORE, "no code here") is None


def test_reaching_tests_name_the_function_then_its_module_then_all() -> None:
    from agentflow.synth.layout import reaching_tests

    tests = {"t/test_a.py": "from pkg.core import clamp\nclamp(1, 2, 3)\n", "t/test_b.py": "import pkg.core\n",
             "t/test_c.py": "def test_x():\n    pass\n"}
    assert reaching_tests(tests, "pkg/core.py", "clamp") == ["t/test_a.py"]
    assert reaching_tests(tests, "pkg/core.py", "_helper") == ["t/test_a.py", "t/test_b.py"]
    assert reaching_tests(tests, "pkg/other.py", "_helper") == sorted(tests)


def _context(passing: set[str], seen: set[str]):  # type: ignore[no-untyped-def]
    from agentflow.synth.build import Context, SynthConfig, SynthReport

    return Context(repo=Path("."), clean=Path("."), files=[], tests={}, texts={}, passing=passing, seen=seen,
                   config=SynthConfig(max_failing=2), python="python3", test_cmd="", env=None, timeout=30.0,
                   run_all=True, name="p", report=SynthReport(), log=lambda _: None)


def test_ids_renamed_between_runs_are_not_failing_tests() -> None:
    from agentflow.swe.testrun import TestRun
    from agentflow.synth.build import _judge

    clean = {f"t/test_a.py::test_x[<obj at 0x{i}>]" for i in range(5)} | {"t/test_b.py::test_y"}
    ctx = _context(clean, clean)
    renamed = {f"t/test_a.py::test_x[<obj at 0x{i + 9}>]": "PASSED" for i in range(5)}
    kept = _judge(ctx, file_mutations("m.py", CORE)[0], ["t/test_a.py", "t/test_b.py"],
                  TestRun(status={**renamed, "t/test_b.py::test_y": "FAILED"}))
    assert kept is not None and kept.failing == ["t/test_b.py::test_y"]
    # where the ids are stable, a test that vanished (its file no longer imports) did not pass
    gone = _judge(ctx, file_mutations("m.py", CORE)[0], ["t/test_b.py"], TestRun(status={}))
    assert gone is None and ctx.report.dropped == {"failing tests did not run": 1}


def test_synth_parses_only_through_pysyntax() -> None:
    """`parsed`: a tree, or None for text that is not Python (a syntax error, a null byte, nesting too deep);
    `compiles` also refuses what only the compiler rejects. No synth module parses on its own."""
    assert isinstance(parsed("x = 1\n"), ast.Module)
    assert parsed("def f(:\n") is None and parsed("x = 1\0\n") is None
    assert parsed("x = " + "(" * 200_000 + ")" * 200_000 + "\n") is None
    assert parsed("return 1\n") is not None and parsed("return 1\n", compiles=True) is None
    synth = ROOT / "agentflow" / "synth"
    parsing = sorted(p.name for p in synth.glob("*.py") if "except SyntaxError" in p.read_text()
                     or "except (SyntaxError" in p.read_text())
    assert parsing == []
