"""Bounded input work: a small hostile file costs the CLI a bounded amount of work, and what it prints cannot
drive the terminal. Each case is the real CLI in a subprocess.

- a YAML alias bomb (several shapes) in a workflow or config file: one line, exit 2;
- a zstd bomb (several shapes) in a run folder's checkpoint database: one line, exit 2;
- a search tree whose parents form a cycle (length 1..3) in a run folder: the viewer's data is a tree;
- control characters (ESC, CSI, BEL, CR, backspace, bidi override, an undecodable byte) in what is printed:
  written as escapes.

Time is the child's CPU time (user + system; this machine is shared, wall time measures the neighbours),
compared with the same command on a well-formed input: the hostile input may add less than 2 s.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import zstandard

ROOT = Path(__file__).resolve().parents[2]
BUDGET_S = 2.0


def cli(*argv: str | bytes, cwd: Path | None = None, timeout: float = 120) -> tuple[int, str, str, float]:
    """Exit code, stdout, stderr (warnings left out) and the CPU seconds the child used."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "agentflow.cli.main", *argv], cwd=cwd, env=env,
                          capture_output=True, timeout=timeout, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    err = "\n".join(line for line in proc.stderr.decode("utf-8", "replace").splitlines()
                    if not line.startswith("agentflow: warning:"))
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), err, cpu


def assert_one_line_error(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err


# ------------------------------------------------------------------------------------------- YAML alias bombs

GOOD_WORKFLOW = "name: w\nnodes:\n  a: {fn: 'agentflow.workflows.demo:summarize', writes: [summary], next: END}\n" \
                "state:\n  summary: {type: str}\n"


def _laughs(levels: int = 9, width: int = 9, *, mapping: bool = False, merge: bool = False) -> str:
    """A billion laughs: level k holds `width` aliases of level k-1 (width**levels values from ~1 KB)."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for k in range(1, levels + 1):
        if merge:
            body = "{" + ", ".join(f"<<: *l{k - 1}" if i == 0 else f"k{i}: *l{k - 1}" for i in range(width)) + "}"
        elif mapping:
            body = "{" + ", ".join(f"k{i}: *l{k - 1}" for i in range(width)) + "}"
        else:
            body = "[" + ", ".join([f"*l{k - 1}"] * width) + "]"
        lines.append(f"l{k}: &l{k} {body}")
    return "\n".join(lines) + "\n"


YAML_BOMBS = {
    "lists": _laughs(),
    "mappings": _laughs(mapping=True),
    "merge-keys": _laughs(merge=True),
    "wide-and-shallow": _laughs(levels=4, width=60),
}


@pytest.fixture(scope="module")
def validate_cpu(tmp_path_factory: pytest.TempPathFactory) -> float:
    path = tmp_path_factory.mktemp("good") / "w.yaml"
    path.write_text(GOOD_WORKFLOW)
    code, _, err, cpu = cli("graph", "validate", str(path))
    assert code == 0, err
    return cpu


@pytest.mark.parametrize("shape", sorted(YAML_BOMBS))
@pytest.mark.parametrize("where", ["workflow file", "config file", "run folder's config"])
def test_a_yaml_alias_bomb_is_one_line_exit_2(tmp_path: Path, shape: str, where: str, validate_cpu: float) -> None:
    bomb = YAML_BOMBS[shape]
    assert len(bomb) < 4096
    if where == "config file":
        (tmp_path / "c.yaml").write_text(bomb)
        argv: list[str] = ["run", "demo", "-c", str(tmp_path / "c.yaml"), "-o", str(tmp_path / "runs")]
    elif where == "run folder's config":  # a bench folder from elsewhere, opened with `view`
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "preds.jsonl").write_text("")
        (tmp_path / "run" / "config.resolved.yaml").write_text(bomb)
        argv = ["view", str(tmp_path / "run"), "-o", str(tmp_path / "page.html")]
    else:
        (tmp_path / "w.yaml").write_text(GOOD_WORKFLOW + "x-defs:\n" + "".join(f"  {line}\n" for line in bomb.splitlines()))
        argv = ["graph", "validate", str(tmp_path / "w.yaml")]
    code, _, err, cpu = cli(*argv)
    assert_one_line_error(code, err, "aliases")
    assert cpu < validate_cpu + BUDGET_S


def test_a_few_aliases_still_load(tmp_path: Path) -> None:
    """A bound, not a ban: anchors used as YAML means them load as before."""
    path = tmp_path / "w.yaml"
    path.write_text("name: w\nstate:\n  summary: &s {type: str}\n  other: *s\n"
                    "nodes:\n  a: {fn: 'agentflow.workflows.demo:summarize', writes: [summary], next: END}\n")
    code, _, err, _ = cli("graph", "validate", str(path))
    assert code == 0, err


# ------------------------------------------------------------------------------------------- zstd bombs


def _zstd_zeros(size: int, *, declare: bool) -> bytes:
    cctx = zstandard.ZstdCompressor(level=3, write_content_size=declare)
    if declare:
        return cctx.compress(b"\0" * size)
    chunk, out = b"\0" * (1 << 20), cctx.compressobj()
    parts = [out.compress(chunk) for _ in range(size >> 20)]
    return b"".join([*parts, out.flush()])


def _with_declared(frame: bytes, size: int) -> bytes:
    """`frame` (written without a content size) with a header saying `size`: descriptor flag FCS=8 bytes."""
    magic, descriptor, rest = frame[:4], frame[4], frame[5:]
    single_segment = descriptor & 0x20
    window = b"" if single_segment else rest[:1]
    body = rest[len(window):]
    return magic + bytes([descriptor | 0xC0]) + window + size.to_bytes(8, "little") + body


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """A finished `agentflow run demo` (runs/ folder), and the CPU seconds of `--history` on it."""
    runs = tmp_path_factory.mktemp("runs")
    code, _, err, _ = cli("run", "demo", "-o", str(runs), "--thread-id", "t1")
    assert code == 0, err
    code, out, err, cpu = cli("run", "-o", str(runs), "--history", "t1")
    assert code == 0 and "step" in out, err
    return runs, cpu


ZSTD_BOMBS = {
    "declared-512MiB": lambda: _zstd_zeros(512 << 20, declare=True),
    "undeclared-512MiB": lambda: _zstd_zeros(512 << 20, declare=False),
    "header-says-1TiB": lambda: _with_declared(zstandard.ZstdCompressor(write_content_size=False).compress(b"x" * 200), 1 << 40),
    "not-zstd": lambda: b"\x28\xb5\x2f\xfd" + os.urandom(64),
}


@pytest.mark.parametrize("shape", sorted(ZSTD_BOMBS))
def test_a_zstd_bomb_in_a_checkpoint_database_is_one_line_exit_2(tmp_path: Path, shape: str,
                                                                 demo_run: tuple[Path, float]) -> None:
    runs, good_cpu = demo_run
    copy = tmp_path / "runs"
    shutil.copytree(runs, copy)
    (db,) = copy.glob("*/checkpoints.db")
    bomb = ZSTD_BOMBS[shape]()
    with sqlite3.connect(db) as conn:  # every checkpoint head: stored compressed, as a bomb
        conn.execute("UPDATE checkpoints SET type = substr(type, 1, instr(type, ':')) || '1', checkpoint = ?", (bomb,))
    code, _, err, cpu = cli("run", "-o", str(copy), "--history", "t1")
    assert_one_line_error(code, err, "checkpoint value")
    assert cpu < good_cpu + BUDGET_S


_DIFF_STORE_GET = """
import json, resource, sys
from agentflow.errors import UserError
from agentflow.graph.run.history import DiffStore
try:
    DiffStore(sys.argv[1]).get(sys.argv[2])
    refused = ""
except UserError as exc:
    refused = str(exc)
use = resource.getrusage(resource.RUSAGE_SELF)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent across exec
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"refused": refused, "cpu": use.ru_utime + use.ru_stime, "peak_kib": hwm}))
"""


@pytest.mark.parametrize("shape", sorted(ZSTD_BOMBS))
def test_a_zstd_bomb_in_the_diffs_store_is_refused(tmp_path: Path, shape: str) -> None:
    from agentflow.graph.run.history import DiffStore

    store = DiffStore(tmp_path)
    digest = store.put("--- a/x\n+++ b/x\n")
    assert store.get(digest) == "--- a/x\n+++ b/x\n"
    (store.root / f"{digest}.diff.zst").write_bytes(ZSTD_BOMBS[shape]())
    # in a process of its own: its peak memory is the read's, not what earlier tests left in this one
    proc = subprocess.run([sys.executable, "-c", _DIFF_STORE_GET, str(tmp_path), digest], capture_output=True,
                          text=True, timeout=60, check=True)
    seen = json.loads(proc.stdout)
    assert "workspace diff" in seen["refused"]
    assert seen["cpu"] < BUDGET_S + 1.5  # the interpreter's own start-up included
    assert seen["peak_kib"] < 400 << 10  # at most the 256 MiB cap was held, never the 512 MiB


# ------------------------------------------------------------------------------------------- search-tree cycles


def _tree_run(folder: Path, cycle: int) -> Path:
    """A run folder whose search.node events form a root with a chain, plus `cycle` nodes whose parents loop."""
    folder.mkdir()

    def node(value: float, **more: object) -> dict[str, object]:  # a search.node event's whole payload
        return {"strategy": "mcts", "thread": None, "depth": 1, "action": None, "value": value, "mean": value,
                "visits": 1, "terminal": True, "error": None, "snapshot_id": None, "diff_id": None, **more}

    events = [{"ts": 1.0, "kind": "search.node", "node_id": "s/root", "parent_id": None, "data": node(0.5)},
              {"ts": 1.1, "kind": "search.node", "node_id": "s/b0", "parent_id": "s/root", "data": node(0.5)}]
    ring = [f"s/c{i}" for i in range(cycle)]
    events += [{"ts": 2.0 + i, "kind": "search.node", "node_id": name, "parent_id": ring[(i + 1) % cycle],
                "data": node(0.1, chosen=i == 0)} for i, name in enumerate(ring)]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (folder / "run.json").write_text(json.dumps({"run_id": "r", "kind": "run"}))
    return folder


def _parents(page_data: dict) -> dict[str, str | None]:
    return {e[2]: e[3] for e in page_data["events"] if e[1] == "search.node"}


@pytest.mark.parametrize("cycle", [1, 2, 3])
def test_a_parent_cycle_in_a_search_tree_becomes_a_tree(tmp_path: Path, cycle: int) -> None:
    from agentflow.observe.view import load_run

    run_dir = _tree_run(tmp_path / "run", cycle)
    parents = _parents(load_run(run_dir))
    for node in parents:  # every walk up ends at a root, within as many steps as there are nodes
        seen = 0
        while node is not None:
            node, seen = parents.get(node), seen + 1
            assert seen <= len(parents), f"{node}: its parents loop"
    assert parents["s/b0"] == "s/root" and len(parents) == cycle + 2  # the rest as written, every node kept
    code, _, err, _ = cli("view", str(run_dir))
    assert code == 0, err
    assert (run_dir / "view.html").is_file()


# ------------------------------------------------------------------------------------------- terminal escapes

ESCAPES = {"ESC": "\x1b]0;owned\x07\x1b[2J", "CSI": "\x9b31m", "BEL": "\x07", "CR": "\rfake line",
           "backspace": "ok\x08\x08", "bidi": "\u202egnp.exe", "newline": "\nagentflow: error: forged"}


def _raw_controls(text: str) -> list[str]:
    return [ch for ch in text if ch not in "\n\t" and unicodedata.category(ch) in ("Cc", "Cf", "Cs")]


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_control_characters_in_an_error_line_are_escaped(tmp_path: Path, name: str) -> None:
    missing = tmp_path / f"c{ESCAPES[name]}.yaml"  # a -c file's path is printed as given
    code, out, err, _ = cli("run", "demo", "-c", str(missing), "-o", str(tmp_path / "runs"))
    # an error message is cut at its first line break: a name holding one shortens the message, forges nothing
    assert_one_line_error(code, err, *(["not found"] if "\n" not in ESCAPES[name] else []))
    assert _raw_controls(out + err) == [] and "forged" not in err


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_control_characters_in_a_thread_id_are_escaped_in_run_and_history_lines(tmp_path: Path, name: str) -> None:
    from agentflow.errors import printable

    thread = f"t{ESCAPES[name]}"
    code, out, err, _ = cli("run", "demo", "-o", str(tmp_path), "--thread-id", thread)
    assert code == 0, err
    assert _raw_controls(out + err) == [] and out.count("\n") == len(out.splitlines())
    assert f"thread {printable(thread)}" in err  # the run line is on stderr (stdout: the result alone)
    assert not any(line.startswith("agentflow: error: forged") for line in (out + err).splitlines())
    code, out, err, _ = cli("run", "-o", str(tmp_path), "--history", thread)
    assert code == 0, err
    assert _raw_controls(out + err) == []


def test_an_undecodable_byte_in_an_argument_is_escaped_not_a_traceback(tmp_path: Path) -> None:
    code, _, err, _ = cli("run", "demo", "-c", os.fsencode(tmp_path) + b"/c\xff.yaml", "-o", str(tmp_path / "runs"))
    assert_one_line_error(code, err, "not found", "\\udcff")
