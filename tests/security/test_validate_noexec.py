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
    + "from pydantic import BaseModel\nfrom agentflow.graph.nodetypes import NodeType\n\n\n"
    "class Loud(BaseModel):\n    volume: int = 1\n\n\n"
    "async def run(state, ctx, settings):\n    return {'volume': settings.volume}\n\n\n"
    "NODE_TYPES = [NodeType(name='evil.step', run=run, settings=Loud, writes=('volume',),"
    " description='Step from a package')]\n",
    "nodes.py": MARK.format(name="nodes_py")
    + "from agentflow.graph.nodetypes import NodeType\n\n\n"
    "async def run(state, ctx, settings):\n    return {'other': True}\n\n\n"
    "NODE_TYPES = [NodeType(name='evil.other', run=run, writes=('other',), description='Step beside the workflow')]\n",
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
    """`agentflow.graph.validate` (the API under the CLI) is static unless asked to import."""
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
