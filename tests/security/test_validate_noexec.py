"""Checking a workflow someone sent you does not run its Python: `graph validate` and `graph types` read the
YAML and check the code it names statically (the file exists, parses, defines the name); the code is imported
only by `agentflow run` or by `--import-code`.

The workflow below names user code in every place a workflow can: `fn:` as `file.py:func` and as `module:func`,
`tools:`, a route's `on:` callable, and `node_types:` (a package module and a `nodes.py` beside the workflow).
Each of those files creates a marker file when it is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MARK = "import pathlib; pathlib.Path(__file__).parent.joinpath('imported-{name}').touch()\n"

FILES = {
    "steps.py": MARK.format(name="fn_file") + "def step(state):\n    return {'status': 'x'}\n",
    "wfhelpers_x.py": MARK.format(name="fn_module") + "def step2(state, ctx):\n    return {'seen': 1}\n",
    "wfcond_x.py": MARK.format(name="route") + "def pick(state):\n    return state.get('status') or 'y'\n",
    "wftools_x.py": MARK.format(name="tools")
    + "from agentflow.tools import tool\n\n\n@tool\ndef shout(text: str) -> str:\n"
    '    """Shout the text."""\n    return text.upper()\n',
    "wfpkg_x/__init__.py": "",
    "wfpkg_x/types.py": MARK.format(name="node_types")
    + "from typing import TypedDict\n\nfrom pydantic import BaseModel\nfrom agentflow.graph.compile.nodetypes import NodeType\n\n\n"
    "class Loud(BaseModel):\n    volume: int = 1\n\n\n"
    "async def run(state, ctx, settings):\n    return {'volume': settings.volume}\n\n\n"
    "class Volume(TypedDict, total=False):\n    volume: int\n\n\n"
    "NODE_TYPES = [NodeType(name='evil.step', run=run, settings=Loud, writes=(Volume,),"
    " description='Step from a package')]\n",
    "nodes.py": MARK.format(name="nodes_py")
    + "from typing import TypedDict\n\nfrom agentflow.graph.compile.nodetypes import NodeType\n\n\n"
    "class Other(TypedDict, total=False):\n    other: bool\n\n\n"
    "async def run(state, ctx, settings):\n    return {'other': True}\n\n\n"
    "NODE_TYPES = [NodeType(name='evil.other', run=run, writes=(Other,), description='Step beside the workflow')]\n",
}

WORKFLOW = """\
name: untrusted
state:
  status: {type: str}
  seen: {type: int}
  volume: {type: int}
  other: {type: bool}
  said: {type: str}
tools: [wftools_x]
node_types: [wfpkg_x.types, nodes.py]
nodes:
  a:
    fn: steps.py:step
    route: {on: "wfcond_x:pick", cases: {x: d, y: END}}
  d: {fn: "wfhelpers_x:step2", next: b}
  b: {type: evil.step, settings: {volume: 3}, next: c}
  c: {type: evil.other, next: t}
  t: {tool: shout, args: {text: hi}, output: said, next: END}
"""

MARKERS = {"fn_file", "fn_module", "route", "tools", "node_types", "nodes_py"}


@pytest.fixture
def untrusted(tmp_path: Path) -> Path:
    folder = tmp_path / "sent"
    for rel, text in FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    (folder / "wf.yaml").write_text(WORKFLOW)
    return folder / "wf.yaml"


def agentflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed `agentflow` command in a fresh process (nothing imported beforehand), run from the
    workflow's folder as a user would, with this checkout first on the path."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [str(Path(sys.executable).with_name("agentflow")), *args], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=120, check=False,
    )


def imported(workflow: Path) -> set[str]:
    return {p.name.removeprefix("imported-") for p in workflow.parent.rglob("imported-*")}


def test_validate_does_not_import_the_workflows_code(untrusted: Path) -> None:
    proc = agentflow("graph", "validate", str(untrusted), cwd=untrusted.parent)
    assert imported(untrusted) == set(), proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert "untrusted: ok (5 nodes)" in proc.stdout
    # what only an import can tell is said, not passed over in silence
    assert "not checked without --import-code" in proc.stdout
    assert "evil.step" in proc.stdout and "evil.other" in proc.stdout
    data = json.loads(agentflow("graph", "validate", "--json", str(untrusted), cwd=untrusted.parent).stdout)
    assert data["ok"] is True and data["problems"] == []
    assert any("evil.step" in line for line in data["unchecked"])
    assert imported(untrusted) == set()


def test_types_does_not_import_the_workflows_code(untrusted: Path) -> None:
    proc = agentflow("graph", "types", "--json", str(untrusted), cwd=untrusted.parent)
    assert imported(untrusted) == set(), proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stderr
    rows = {row["type"]: row for row in json.loads(proc.stdout)["types"]}
    assert "swe.edit" in rows and rows["swe.edit"]["settings"]  # the shipped types are listed as before
    assert rows["evil.step"]["settings"] is None and "not checked without --import-code" in rows["evil.step"]["note"]
    assert "evil.other" in rows
    text = agentflow("graph", "types", str(untrusted), cwd=untrusted.parent).stdout
    assert "evil.step" in text and "not checked without --import-code" in text
    assert imported(untrusted) == set()


def test_import_code_flag_and_run_do_import(untrusted: Path) -> None:
    proc = agentflow("graph", "validate", "--import-code", str(untrusted), cwd=untrusted.parent)
    assert proc.returncode == 0, proc.stderr
    assert "not checked" not in proc.stdout
    assert imported(untrusted) == MARKERS
    for marker in untrusted.parent.rglob("imported-*"):
        marker.unlink()
    proc = agentflow("graph", "types", "--import-code", "--json", str(untrusted), cwd=untrusted.parent)
    assert proc.returncode == 0, proc.stderr
    rows = {row["type"]: row for row in json.loads(proc.stdout)["types"]}
    assert rows["evil.step"]["settings"] == ["volume"]
    assert imported(untrusted) >= {"node_types", "nodes_py"}
    for marker in untrusted.parent.rglob("imported-*"):
        marker.unlink()
    proc = agentflow("run", str(untrusted), "--json", "--input", "{}", cwd=untrusted.parent)
    assert proc.returncode == 0, proc.stderr
    state = json.loads(proc.stdout.strip().splitlines()[-1])["state"]
    assert state == {**state, "status": "x", "seen": 1, "volume": 3, "other": True, "said": "HI"}
    assert imported(untrusted) == MARKERS


def test_a_missing_function_is_reported_without_importing(untrusted: Path) -> None:
    text = untrusted.read_text().replace("steps.py:step", "steps.py:stpe").replace("wfcond_x:pick", "wfcond_x:pik")
    untrusted.write_text(text.replace("tools: [wftools_x]", "tools: [wftools_x, no_such_pack_x]"))
    proc = agentflow("graph", "validate", str(untrusted), cwd=untrusted.parent)
    assert proc.returncode == 2
    err = proc.stderr
    assert "node 'a'" in err and "'stpe'" in err and "route from 'a'" in err and "'pik'" in err
    assert "no_such_pack_x" in err
    assert "Traceback" not in err
    assert imported(untrusted) == set()


def test_library_validate_does_not_import(untrusted: Path) -> None:
    """`agentflow.graph.check.validation` (the API under the CLI) is static unless asked to import."""
    code = (
        "import sys\nfrom agentflow.graph import load_workflow, validate\n"
        f"spec = load_workflow({str(untrusted)!r})\n"
        "print(len(validate(spec)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0"
    assert imported(untrusted) == set()


def _validate(folder: Path, workflow: str) -> tuple[list[str], list[str]]:
    """(problems, notes) of the workflow text in `folder`, in-process, as `graph validate` finds them."""
    from agentflow.graph.check.validation import validate
    from agentflow.graph.define.loader import load_workflow

    (folder / "wf.yaml").write_text(workflow)
    notes: list[str] = []
    problems = [p.message for p in validate(load_workflow(folder / "wf.yaml"), notes=notes)]
    return problems, notes


def test_what_reading_finds_and_what_it_only_notes(tmp_path: Path) -> None:
    folder = tmp_path / "sent"
    folder.mkdir()
    (tmp_path / "outside.py").write_text(MARK.format(name="outside") + "def step(state):\n    return {}\n")
    (folder / "bad_syntax.py").write_text(MARK.format(name="syntax") + "def step(state:\n")
    (folder / "sigs.py").write_text(
        MARK.format(name="sigs") + "def nothing():\n    return {}\n\n\ndef three(state, ctx, extra):\n    return {}\n\n\n"
        "def two(state, ctx):\n    return 'x'\n"
    )
    (folder / "made.py").write_text(
        MARK.format(name="made") + "from agentflow.graph.compile.nodetypes import NodeType\n\n\n"
        "def make(name):\n    return NodeType(name=name, run=None)\n\n\nNODE_TYPES = [make('made.one')]\n"
    )
    (folder / "empty_types.py").write_text(MARK.format(name="empty") + "TYPES = []\n")
    head = "name: w\nnodes:\n"
    problems, notes = _validate(folder, head + "  a: {fn: '../outside.py:step', next: END}\n")
    assert problems == [] and any("outside the workflow's folder" in n and "not checked" in n for n in notes)
    problems, _ = _validate(folder, head + "  a: {fn: 'bad_syntax.py:step', next: END}\n")
    assert len(problems) == 1 and "cannot parse" in problems[0] and "line 2" in problems[0]
    problems, _ = _validate(
        folder,
        head + "  a: {fn: 'sigs:nothing', next: b}\n  b: {fn: 'sigs:three', next: c}\n"
        "  c:\n    fn: 'sigs:nothing'\n    route: {on: 'sigs:two', cases: {x: END}}\n",
    )
    assert sum("nothing() (line 2) cannot be called as (state) or (state, ctx)" in p for p in problems) == 2
    assert any("three() (line 6)" in p for p in problems)
    assert any("route from 'c'" in p and "two() (line 10) cannot be called as (state)" in p for p in problems)
    # a node_types module that makes its types in code: an unknown type is noted, not passed or failed
    problems, notes = _validate(folder, head + "  a: {type: made.one, next: END}\nnode_types: [made.py]\n")
    assert problems == [] and any("'made.one'" in n and "not checked without --import-code" in n for n in notes)
    problems, _ = _validate(folder, head + "  a: {type: swe.rnak, next: END}\nnode_types: [empty_types.py]\n")
    assert problems == ["w: node_types: empty_types.py has no NODE_TYPES list (define NODE_TYPES = [NodeType(...)])"]
    assert not list(tmp_path.rglob("imported-*"))
