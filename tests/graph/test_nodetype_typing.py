"""A node type is checked where it is declared: mypy (the real one, `--strict`) rejects a node type whose function
takes another state, settings or deps than the type declares, and accepts the matching one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import agentflow

SNIPPET = '''\
from typing import Any

from agentflow.codegen.nodes import CodeGenSettings, write
from agentflow.codegen.state import CodeGenState
from agentflow.graph.compile.nodetypes import NodeType
from agentflow.instruct.state import InstructState
from agentflow.repair.nodes import RankSettings, RepairNodeType, rank
from agentflow.repair.nodetypes.runtime import RepairRuntime
from agentflow.repair.nodetypes.state import RepairState

matching = NodeType("swe.rank", rank, RankSettings, state=RepairState, deps=RepairRuntime)
matching_list: list[RepairNodeType[Any]] = [matching]
codegen_matching = NodeType("codegen.write", write, CodeGenSettings, state=CodeGenState)
repair_under_instruct_state = NodeType("swe.rank", rank, RankSettings, state=InstructState)  # error: state
codegen_with_repair_settings = NodeType("codegen.write", write, RankSettings, state=CodeGenState)  # error: settings
repair_with_other_deps = NodeType("swe.rank", rank, RankSettings, deps=str)  # error: deps
wired_into_repair: list[RepairNodeType[Any]] = [codegen_matching]  # error: state
'''


@pytest.mark.slow
def test_mypy_rejects_a_node_type_of_a_mismatched_state_settings_or_deps(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET)
    root = Path(agentflow.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), str(snippet)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    errors = {int(m.group(1)) for m in re.finditer(r"^\S*snippet\.py:(\d+): error:", done.stdout, re.MULTILINE)}
    lines = SNIPPET.splitlines()
    expected = {n for n, line in enumerate(lines, 1) if "# error:" in line}
    assert len(expected) == 4
    assert errors == expected, done.stdout + done.stderr
