"""Localization by running code: the issue's examples and the suite's tests, call-traced.

The unit tests read reports as the sandbox would write them (and as a hostile one could); the Docker test
runs the real tracer and pytest plugin in a real sandbox on a real package (parse 1.20.2 with its injected
timezone-sign bug), where the faulty helper is named nowhere in the report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.repair.locate.localize import RunEvidence, rank_windows, traceback_frames
from agentflow.repair.locate.spectrum import (
    MARKER,
    ExampleRun,
    FunctionIndex,
    SuiteSpectrum,
    by_suspicion,
    evidence_from_json,
    module_of,
    names_to_import,
    ochiai,
    read_example_run,
    read_spectrum,
)
from agentflow.repair.locate.statement import issue_examples
from agentflow.repair.nodetypes.rollout import SweEditSettings
from tests.repair.conftest import run_with_spectrum_plugin

ROOT = Path(__file__).resolve().parents[2]

ISSUE = """Parsed offsets come back negated

```python
>>> import pkg
>>> r = pkg.parse("{:ti}",
...               "12:00+01:00")
>>> r.offset
-60
```

Expected `60`. A config shows it as well:

```python
cfg = Config()
print(cfg.offset("+01:00"))
```

The output:

```
-60
```
"""

SOURCES = {
    "pkg/__init__.py": (
        "from pkg.core import parse, Config\n"
    ),
    "pkg/core.py": (
        "class Config:\n"
        "    def offset(self, text):\n"
        "        return _minutes(text)\n"
        "\n"
        "\n"
        "def parse(fmt, text):\n"
        "    return Result(_minutes(text[-6:]))\n"
        "\n"
        "\n"
        "def _minutes(text):\n"
        "    sign, hours = text[0], int(text[1:3])\n"
        "    minutes = hours * 60\n"
        "    return minutes if sign == '-' else -minutes\n"
        "\n"
        "\n"
        "class Result:\n"
        "    def __init__(self, offset):\n"
        "        self.offset = offset\n"
        "\n"
        "\n"
        "def format_offset(value):\n"
        "    '''offset parsed offsets offset text'''\n"
        "    return f'offset {value} parsed offset'\n"
    ),
    "tests/test_core.py": "def test_x():\n    pass\n",
}


def test_examples_are_the_prompted_statements_and_the_code_blocks_that_call_something():
    examples = issue_examples(ISSUE)
    assert examples == [
        "import pkg",
        'r = pkg.parse("{:ti}",\n              "12:00+01:00")',
        "r.offset",
        'cfg = Config()\nprint(cfg.offset("+01:00"))',
    ]  # the shown outputs (-60) and the output block are not run
    assert issue_examples("Nothing runnable here, only `words`.") == []


def test_names_the_examples_use_without_importing_them_are_imported_from_their_one_module():
    names = names_to_import(issue_examples(ISSUE), SOURCES)
    assert names == {"Config": "pkg.core"}  # `pkg` is imported by the examples; `r`, `cfg` are bound there
    assert module_of("src/pkg/sub/mod.py") == "pkg.sub.mod" and module_of("pkg/__init__.py") == "pkg"
    assert module_of("scripts/my-tool.py") is None


def _report(rows: list, errors: list[str] | None = None) -> str:
    return "printed by the examples\n" + MARKER + json.dumps({"calls": rows, "errors": errors or []}) + "\n"


def test_a_tracer_report_keeps_only_rows_inside_repository_functions_in_call_order():
    index = FunctionIndex(SOURCES)
    rows = [
        ["pkg/core.py", "Result.__init__", 17, 2, 1],
        ["pkg/core.py", "parse", 6, 0, 1],
        ["pkg/core.py", "_minutes", 10, 1, 1],
        ["pkg/core.py", "_minutes.<locals>.<genexpr>", 12, 3, 4],  # nested code counts for its function
        ["/etc/passwd", "x", 1, 4, 1],                               # not a repository file
        ["tests/test_core.py", "test_x", 1, 5, 1],                   # a test file
        ["pkg/core.py", "class body", 16, 6, 1],                     # not inside a function
        ["pkg/core.py", "bad", "12", 7, 1],                          # not a line number
        "garbage",
    ]
    run = read_example_run(_report(rows, ["Traceback ...\nValueError: x"]), index, 3)
    assert run.called == (("pkg/core.py", "parse"), ("pkg/core.py", "_minutes"), ("pkg/core.py", "Result.__init__"))
    assert run.errors.endswith("ValueError: x") and run.statements == 3
    # no report line, or one that is not JSON: nothing ran as far as the host knows
    silent = read_example_run("no marker at all", index, 3)
    assert silent.called == () and silent.problem == "the tracer wrote no report"  # said, not silent
    assert read_example_run(MARKER + "{not json", index, 3).called == ()
    assert read_example_run(MARKER + "{not json", index, 3).problem


def test_a_spectrum_report_is_bounded_by_its_own_test_counts_and_malformed_ones_are_dropped():
    index = FunctionIndex(SOURCES)
    text = json.dumps({"tests": {"passed": 4, "failed": 1}, "functions": [
        ["pkg/core.py", 6, 4, 1], ["pkg/core.py", 10, 1000, 1000], ["pkg/core.py", 21, 3, 0], ["x.py", 1, 1, 1],
    ]})
    spectrum = read_spectrum(text, index)
    assert spectrum is not None and (spectrum.passed, spectrum.failed) == (4, 1)
    assert spectrum.functions == {("pkg/core.py", "parse"): (4, 1), ("pkg/core.py", "_minutes"): (4, 1),
                                  ("pkg/core.py", "format_offset"): (3, 0)}
    assert read_spectrum("[]", index) is None and read_spectrum("", index) is None


def test_ochiai_counts_the_examples_as_one_more_failing_run():
    spectrum = SuiteSpectrum(passed=9, failed=1, functions={("p.py", "parse"): (9, 1), ("p.py", "helper"): (0, 1),
                                                           ("p.py", "other"): (5, 0)})
    examples = ExampleRun(2, called=(("p.py", "parse"), ("p.py", "helper")))
    scores = ochiai(spectrum, examples)
    assert scores[("p.py", "helper")] == pytest.approx(2 / (2 * 2) ** 0.5, abs=1e-4)  # every failing run, no passing one
    assert scores[("p.py", "parse")] == pytest.approx(2 / (2 * 11) ** 0.5, abs=1e-4)  # every failing run, all passing ones
    assert ("p.py", "other") not in scores                                   # no failing run reached it
    assert ochiai(None, ExampleRun()) == {}


def test_evidence_lifts_the_helper_the_examples_ran_over_the_function_whose_words_match():
    issue = "Parsed offsets come back negated: the offset of +01:00 is -60, it should be 60. format_offset shows it."
    plain = rank_windows(SOURCES, issue, limit=2)
    assert [w.symbol for w in plain] == ["format_offset", "Config.offset"]  # words alone
    ran = frozenset({("pkg/core.py", "parse"), ("pkg/core.py", "_minutes"), ("pkg/core.py", "Result.__init__")})
    suspicion = {("pkg/core.py", "_minutes"): 1.0, ("pkg/core.py", "parse"): 0.5}
    lifted = rank_windows(SOURCES, issue, limit=2, evidence=RunEvidence(ran, suspicion))
    assert [w.symbol for w in lifted] == ["_minutes", "parse"]
    # a round trip through the graph state keeps it
    summary = {"executed": [list(k) for k in ran], "suspicion": [[p, q, v] for (p, q), v in suspicion.items()],
               "errors": ""}
    assert evidence_from_json(summary) == RunEvidence(ran, suspicion)
    assert not evidence_from_json(None)


def test_frames_resolve_to_the_longest_repository_path_they_end_with():
    files = {"a/__init__.py", "b/__init__.py", "b/c.py"}
    output = 'File "/work/b/__init__.py", line 3, in f\nFile "/work/b/c.py", line 7, in g\n'
    for _ in range(5):  # not the set's iteration order: the same answer every time
        assert traceback_frames(output, files) == [("b/__init__.py", 3), ("b/c.py", 7)]


def test_the_tracer_runs_statements_like_a_doctest_and_reports_only_the_examples_own_calls(tmp_path):
    """The sandbox-side script, run here as a plain process on a throwaway package: a raising statement does
    not stop the next, names are imported for the examples, and calls made while importing are not theirs."""
    (tmp_path / "pkg").mkdir()
    for path, text in SOURCES.items():
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text(text)
    (tmp_path / "pkg" / "core.py").write_text(SOURCES["pkg/core.py"] + "\n_AT_IMPORT = format_offset(1)\n")
    spec = {"statements": ["import pkg", "pkg.parse('x', 'bad')", "Config().offset('+01:00')"],
            "names": {"Config": "pkg.core"}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    tracer = ROOT / "agentflow" / "repair" / "locate" / "_tracer.py"
    out = subprocess.run([sys.executable, str(tracer), "spec.json"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60, env={"PYTHONPATH": ".", "PATH": "/usr/bin:/bin"}, check=True).stdout
    run = read_example_run(out, FunctionIndex(SOURCES), 3)
    names = [q for _, q in run.called]
    assert names == ["parse", "_minutes", "Config.offset"]  # format_offset ran only at import
    assert "ValueError" in run.errors  # int('ba') raised; the next statement still ran


@pytest.mark.docker
async def test_in_a_real_sandbox_the_spectrum_finds_the_helper_the_report_never_names(docker_image: str):
    """parse 1.20.2 with the timezone sign flipped in `date_convert`: the report shows `parse.parse(...)` and
    `utcoffset()`; words alone never reach `date_convert`, the examples' trace and the suite's spectrum do."""
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.edit.steps import issue_text, suspects
    from agentflow.repair.verify.workbench import Workbench
    from agentflow.sandbox import open_sandbox
    from agentflow.swe.tasks import load_tasks

    tasks_file = ROOT / "examples" / "real-tasks" / "tasks.jsonl"
    task = next(t for t in load_tasks(tasks_file) if t.instance_id == "parse__parse-1")
    cfg = load_repair_config(["backend=docker", f"sandbox.image={docker_image}"])
    async with open_sandbox("docker", cfg.sandbox) as sandbox:
        bench = Workbench(sandbox, task, cfg, "python3")
        await bench.setup()
        base = await bench.verify_base()
        sources = await bench.python_sources()
        issue = issue_text(task.problem_statement, task.hints_text)
        evidence, summary = await bench.gather_evidence(issue, sources, test_timeout_s=300)
        # the workspace is back at the base commit: nothing the examples or tests wrote is left for a diff
        patch, _ = await bench.diff()
    assert patch == ""
    assert ("parse.py", "date_convert") in evidence.executed
    assert summary["tests"]["failed"] >= 1 and summary["tests"]["passed"] > 50
    assert summary["problems"] == []
    assert evidence.suspicion[("parse.py", "date_convert")] > 0
    shows = SweEditSettings()  # the suspects an edit node shows, by its settings
    plain = [w.symbol for w in suspects(shows, sources, issue, base.output, focus=0)]
    traced = [w.symbol for w in suspects(shows, sources, issue, base.output, focus=0, evidence=evidence)]
    assert "date_convert" not in plain
    assert "date_convert" in traced


def test_the_pytest_plugin_counts_what_each_test_calls_but_not_pytest_s_own_reprs(tmp_path):
    """The sandbox-side plugin under a real pytest: a failing assertion makes pytest call `Box.__repr__` for
    its message; that call is pytest's, not the test's, so `__repr__` gets no failing count."""
    (tmp_path / "box.py").write_text(
        "class Box:\n"
        "    def __init__(self, v):\n        self.v = v\n"
        "    def __repr__(self):\n        return f'Box({self.v})'\n"
        "    def double(self):\n        return self.v * 3\n"
        "    def half(self):\n        return self.v / 2\n"
    )
    (tmp_path / "test_box.py").write_text(
        "from box import Box\n"
        "def test_double():\n    assert Box(2).double() == Box(4).v\n"
        "def test_half():\n    assert Box(4).half() == 2\n"
        "def test_repr():\n    assert repr(Box(1)) == 'Box(1)'\n"
    )
    done, out = run_with_spectrum_plugin(tmp_path)
    assert done.returncode == 1  # one test fails, on purpose
    sources = {"box.py": (tmp_path / "box.py").read_text(), "test_box.py": (tmp_path / "test_box.py").read_text()}
    spectrum = read_spectrum(out.read_text(), FunctionIndex(sources))
    assert spectrum is not None and (spectrum.passed, spectrum.failed) == (2, 1)
    assert spectrum.functions == {("box.py", "Box.__init__"): (2, 1), ("box.py", "Box.double"): (0, 1),
                                  ("box.py", "Box.half"): (1, 0), ("box.py", "Box.__repr__"): (1, 0)}
    assert max(ochiai(spectrum, ExampleRun()).items(), key=lambda kv: kv[1])[0] == ("box.py", "Box.double")


def test_the_tracer_shows_what_each_statement_printed_echoed_or_raised(tmp_path):
    """What a reader of the report sees, per statement: printed text, the last line's value as an interactive
    session echoes it, and the type and message of an exception (no traceback: its line numbers move with edits);
    an object's address is masked on the host, so two runs of the same code compare equal."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(
        "class Box:\n    def __init__(self, v):\n        self.v = v\n    def half(self):\n        return self.v // 2\n"
        "    def __repr__(self):\n        return f'Box({self.v})'\n")
    spec = {"statements": ["b = Box(5)\nprint('made')\nb.half()", "b.v = None", "b.half()", "object()", "b"],
            "names": {"Box": "pkg"}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    tracer = ROOT / "agentflow" / "repair" / "locate" / "_tracer.py"
    outputs = [subprocess.run([sys.executable, str(tracer), "spec.json"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=60, env={"PYTHONPATH": ".", "PATH": "/usr/bin:/bin"}, check=True).stdout
               for _ in range(2)]
    index = FunctionIndex({"pkg/__init__.py": (tmp_path / "pkg" / "__init__.py").read_text()})
    first, second = (read_example_run(out, index, 5) for out in outputs)
    assert first.shown[:3] == ("made\n2\n", "", "raised TypeError: unsupported operand type(s) for //: 'NoneType' and 'int'\n")
    assert first.shown[3].startswith("<object object at 0x?>")
    assert first.shown == second.shown
    assert first.shown[4] == "Box(None)\n"
    assert ("pkg/__init__.py", "Box.half") in first.called
    assert ("pkg/__init__.py", "Box.__repr__") not in first.called  # the echo is not a call of the report's


# a small repository whose suite has one test module that cannot be imported (it needs a module that is not
# installed) beside modules that import and run
UNIMPORTABLE_MODULE_REPO = {
    "calc/__init__.py": "",
    "calc/ops.py": "def add(a, b):\n    return a - b\n\n\ndef neg(a):\n    return -a\n",
    "tests/__init__.py": "",
    "tests/test_ops.py": (
        "from calc.ops import add, neg\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_neg():\n    assert neg(2) == -2\n"
    ),
    "tests/test_extra.py": "import agentflow_no_such_dependency  # noqa\n\n\ndef test_extra():\n    pass\n",
}


async def test_a_test_module_that_cannot_be_imported_does_not_stop_the_traced_suite():
    """pytest stops before the first test when any test module fails to import; the traced run goes on with
    the modules that import, so the spectrum still counts their tests and what they called."""
    from agentflow.repair.locate.spectrum import run_spectrum
    from agentflow.sandbox import open_sandbox

    async with open_sandbox("local") as sandbox:
        for path, text in UNIMPORTABLE_MODULE_REPO.items():
            await sandbox.write_file(path, text)
        spectrum, problem = await run_spectrum(
            sandbox, f"{sys.executable} -m pytest -q -p no:cacheprovider", FunctionIndex(UNIMPORTABLE_MODULE_REPO),
            timeout_s=120, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert problem == ""
    assert spectrum is not None and (spectrum.passed, spectrum.failed) == (1, 1)
    assert spectrum.functions == {("calc/ops.py", "add"): (0, 1), ("calc/ops.py", "neg"): (1, 0)}


async def test_a_traced_suite_that_ran_no_test_is_no_spectrum_and_says_so():
    """A suite that collects nothing gives no evidence: the problem names it rather than a spectrum of zeros."""
    from agentflow.repair.locate.spectrum import run_spectrum
    from agentflow.sandbox import open_sandbox

    sources = {k: v for k, v in UNIMPORTABLE_MODULE_REPO.items() if k != "tests/test_ops.py"}
    async with open_sandbox("local") as sandbox:
        for path, text in sources.items():
            await sandbox.write_file(path, text)
        spectrum, problem = await run_spectrum(
            sandbox, f"{sys.executable} -m pytest -q -p no:cacheprovider", FunctionIndex(sources),
            timeout_s=120, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert spectrum is None
    assert problem.startswith("the traced suite ran no test")


def test_suspicion_ties_are_ordered_by_path_then_name_whatever_the_order_they_were_found_in():
    found = {("pkg/b.py", "f"): 0.5, ("pkg/a.py", "z"): 0.5, ("pkg/c.py", "g"): 0.9, ("pkg/a.py", "y"): 0.5}
    expected = [("pkg/c.py", "g"), ("pkg/a.py", "y"), ("pkg/a.py", "z"), ("pkg/b.py", "f")]
    assert [key for key, _ in by_suspicion(found)] == expected
    assert [key for key, _ in by_suspicion(dict(reversed(list(found.items()))))] == expected
