"""`agentflow view RUN_DIR`: one self-contained HTML page of a run (no CDN, works offline, opens from disk).

The page is built from the run directory's own files (events.jsonl, report.json, candidates.jsonl, preds.jsonl,
per-instance outcome.json, config.resolved.yaml, run.json, usage.json); the script in `viewer.js` derives the timeline, the
graph's node states, the search trees and the budget use from the events in the browser. Everything shown went
through `secrets.redact` when it was written; it is redacted again here, for files written by older versions
(with the secrets their configs hold in clear registered first).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from importlib import resources
from pathlib import Path
from typing import Any

import networkx as nx

from agentflow.config import load_yaml
from agentflow.errors import UserError
from agentflow.events import read_events
from agentflow.events.kinds import ModelTurn
from agentflow.runfiles import read_inside, read_text, replace_file
from agentflow.secrets import redact, register_secrets_in

VIEW_FILE = "view.html"
PATCH_CAP = 40_000  # characters of one patch kept in the page (a longer one is cut, marked)
TEXT_CAP = 20_000  # characters of any other long string in event data


def _read_json(path: Path, root: Path | None = None) -> Any:
    """A JSON file of the run folder `root` (default: the file's folder): a regular file reached through real
    folders only (a link out of the folder is refused, never read into the page); None when absent."""
    try:
        text = read_inside(root or path.parent, path)
        return None if text is None else json.loads(text)
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested too deeply to parse
        raise UserError(f"{path}: not readable as JSON ({exc.__class__.__name__})",
                        hint="the run may still be writing it; try again when it ends") from None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in (read_text(path) or "").splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            # a torn last line of a run that is still going or crashed; or a line nested too deeply to parse,
            # which agentflow never writes (a tampered folder): the page shows the rest
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def _cap(value: Any, limit: int = TEXT_CAP) -> Any:
    """Long strings cut (the page stays fast), recursing into lists and dicts."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"\n...[{len(value) - limit} more characters]"
    if isinstance(value, list):
        return [_cap(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: _cap(v, PATCH_CAP if k in ("patch", "model_patch") else limit) for k, v in value.items()}
    return value


def _break_parent_cycles(events: list[list[Any]]) -> None:
    """Make the search tree of `search.node` rows ([ts, kind, node, parent, data]) a tree: a run folder is any
    file, and a parent chain that comes back to itself would keep the page walking it forever. On each cycle,
    the node seen first becomes a root (its rows lose their parent), so every node is still shown."""
    parent: dict[str, str | None] = {}
    first: dict[str, int] = {}
    for i, (_, kind, row_node, up, _) in enumerate(events):
        if kind == "search.node" and row_node:
            parent[row_node] = up
            first.setdefault(row_node, i)
    graph = nx.DiGraph((node, up) for node, up in parent.items() if up is not None)
    roots = {min(cycle, key=first.__getitem__) for cycle in nx.simple_cycles(graph)}
    for row in events:
        if row[1] == "search.node" and row[2] in roots:
            row[3] = None


def _config(run_dir: Path) -> dict[str, Any]:
    text = read_text(run_dir / "config.resolved.yaml")
    if text is None:
        return {}
    data = load_yaml(text, str(run_dir / "config.resolved.yaml"))  # bounded: an alias bomb is one line, exit 2
    return data if isinstance(data, dict) else {}


def _outcomes(run_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    root = run_dir / "instances"
    if root.is_dir():
        for path in sorted(root.glob("*/outcome.json")):
            data = _read_json(path, run_dir)
            if isinstance(data, dict) and data.get("instance_id"):
                data.pop("model_patch", None)  # preds.jsonl holds it once
                out[str(data["instance_id"])] = data
    return out


def _eval_files(rdir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """`agentflow eval` keeps each instance's patch and log in `<model>/<instance>/`: (patches, logs) by id."""
    patches: dict[str, str] = {}
    logs: dict[str, str] = {}
    for path in sorted(rdir.glob("*/*/patch.diff")):
        iid = path.parent.name
        patches.setdefault(iid, _cap(read_inside(rdir, path) or "", PATCH_CAP))
        log = read_inside(rdir, path.parent / "run_instance.log")
        if log is not None:
            logs[iid] = _cap(log)
    return patches, logs


def run_kind(run_dir: Path, events: list[list[Any]], report: Any) -> str:
    """workflow (`agentflow run`), repair (one task), bench (several) or eval (report.json, no events)."""
    if (run_dir / "run.json").is_file():
        return "workflow"
    if report is not None and not events:
        return "eval"
    total = next((e[4].get("total") for e in events if e[1] == "run.start"), None)
    if total is None and isinstance(report, dict):
        total = report.get("total_instances")
    return "repair" if total == 1 else "bench"


def load_run(run_dir: str | Path, graph: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the page shows, as one JSON-able dict; `graph` is the workflow's outline (nodes, edges)."""
    rdir = Path(run_dir)
    if not rdir.is_dir():
        raise UserError(f"run directory {rdir} not found", hint="pass a folder under runs/ (see `ls runs`)")
    markers = ("events.jsonl", "report.json", "run.json", "preds.jsonl")
    if not any((rdir / m).is_file() for m in markers):
        raise UserError(f"{rdir} is not a run directory (no {', '.join(markers)})",
                        hint="pass the folder printed at the end of `agentflow run/repair/bench/eval`")
    events: list[list[Any]] = []
    if (rdir / "events.jsonl").is_file():
        # `model.turn` is training data (whole prompts, token ids): `agentflow export` reads it, the page does not
        events = [[e.ts, e.kind, e.node_id, e.parent_id, _cap(e.data)] for e in read_events(rdir / "events.jsonl")
                  if not isinstance(e, ModelTurn)]
        _break_parent_cycles(events)
    report = _read_json(rdir / "report.json")
    eval_patches, eval_logs = _eval_files(rdir)
    data = {
        "kind": run_kind(rdir, events, report),
        "run_dir": str(rdir.resolve()),
        "name": rdir.resolve().name,
        "meta": _read_json(rdir / "run.json"),
        "usage": _read_json(rdir / "usage.json"),  # a workflow run's budget use, summed over its legs
        "config": _config(rdir),
        "report": report,
        "preds": eval_patches | {p["instance_id"]: _cap(p.get("model_patch") or "", PATCH_CAP)
                                 for p in _read_jsonl(rdir / "preds.jsonl") if p.get("instance_id")},
        "logs": eval_logs,
        "candidates": [_cap(c) for c in _read_jsonl(rdir / "candidates.jsonl")],
        "outcomes": _outcomes(rdir),
        "events": events,
        "graph": graph,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    register_secrets_in(data)  # a key in clear in an older run's config: masked wherever else it shows up
    redacted: dict[str, Any] = redact(data)
    return redacted


def _asset(name: str) -> str:
    return resources.files("agentflow.observe").joinpath("assets", name).read_text(encoding="utf-8")


def _csp_source(text: str) -> str:
    """The CSP source that allows exactly this inline script or style (the browser hashes the element's text)."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


# `/*{{NAME}}*/` where the template must stay valid CSS/JS, `{{NAME}}` elsewhere.
_PLACEHOLDER = re.compile(r"/\*\{\{([A-Z_]+)\}\}\*/|\{\{([A-Z_]+)\}\}")


def render_html(data: dict[str, Any]) -> str:
    """The page: the template with the style, the script and the data inlined (`</` escaped in the data), under a
    CSP that allows only that script and style (by hash: no 'unsafe-inline')."""
    payload = json.dumps(data, default=str, separators=(",", ":"))
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    title = f"agentflow {data['kind']}: {data['name']}".replace("&", "&amp;").replace("<", "&lt;")
    css, js = _asset("viewer.css"), _asset("viewer.js")
    values = {"TITLE": title, "CSS": css, "DATA": payload, "JS": js,
              "STYLE_HASH": _csp_source(css), "SCRIPT_HASH": _csp_source(js)}
    # One pass: what is put in (run content that spells a placeholder, too) is never scanned again.
    return _PLACEHOLDER.sub(lambda m: values[m.group(1) or m.group(2)], _asset("viewer.html"))


def write_view(run_dir: str | Path, out: str | Path | None = None, graph: dict[str, Any] | None = None) -> Path:
    """Write the page (default `RUN_DIR/view.html`) and return its path."""
    data = load_run(run_dir, graph)
    path = Path(out) if out is not None else Path(run_dir) / VIEW_FILE
    # the data was redacted (`load_run`); the page is again, as text, for a secret in a form only it shows;
    # never written through a link the run folder brings
    replace_file(path, redact(render_html(data), urls=False))
    return path
