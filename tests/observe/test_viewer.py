"""`agentflow view` pages opened in headless Chromium: large runs open fast, a search node expands to its patch
and test results, a workflow's graph shows node states, run content stays text, and nothing logs an error."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run

from .conftest import console_errors
from .synthetic import write_synthetic_run

ROOT = Path(__file__).resolve().parents[2]


def open_view(browser: Any, run_dir: Path) -> float:
    """Build the page with the CLI, open it from disk; the page's own time to its first complete render (ms)."""
    assert run(["view", str(run_dir)]) == 0
    browser.get((run_dir / "view.html").resolve().as_uri())
    deadline = time.monotonic() + 10
    while browser.execute_script("return document.body.getAttribute('data-ready')") != "1":
        assert time.monotonic() < deadline, "the page never finished rendering"
        time.sleep(0.05)
    return float(browser.execute_script("return window.agentflowViewReadyMs"))


def heading_becomes(browser: Any, text: str, timeout: float = 5.0) -> bool:
    """Whether the page's heading reads `text` within `timeout` (a click re-renders <main>: the heading found
    just after it may be the old one, gone by the time it is read)."""
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if browser.find_element("css selector", "main h2").text == text:
                return True
        except StaleElementReferenceException:
            pass
        time.sleep(0.05)
    return False


def test_a_200_task_bench_opens_within_2_seconds(browser: Any, tmp_path: Path) -> None:
    run_dir = write_synthetic_run(tmp_path / "bench", tasks=200, nodes_per_task=9)
    ready_ms = open_view(browser, run_dir)
    assert ready_ms < 2000
    rows = browser.find_elements("css selector", "#instances tbody tr")
    assert len(rows) == 200
    assert rows[0].get_attribute("data-instance") == "synth__pkg-0" and "submitted" in rows[0].text
    assert browser.find_element("css selector", ".cards").text.count("200/200 resolved") == 1
    browser.find_element("link text", "synth__pkg-42").click()  # the instance's own page
    assert heading_becomes(browser, "synth__pkg-42")
    assert len(browser.find_elements("css selector", "#search-tree .snode")) >= 1
    assert len(browser.find_elements("css selector", "#timeline .tl-row")) > 9
    assert console_errors(browser) == []


def test_a_500_node_mcts_tree_opens_within_2_seconds_and_expands(browser: Any, tmp_path: Path) -> None:
    run_dir = write_synthetic_run(tmp_path / "mcts", tasks=1, nodes_per_task=500)
    assert open_view(browser, run_dir) < 2000
    assert "500 nodes" in browser.find_element("css selector", "main").text
    root = browser.find_element("css selector", "#search-tree > .snode > .srow")
    root.click()
    kids = browser.find_elements("css selector", "#search-tree > .snode > .kids > .snode")
    assert kids  # children render only when their parent is opened
    kids[0].find_element("css selector", ".srow").click()
    detail = kids[0].find_element("css selector", ".sdetail")
    assert "diff --git a/pkg/mod.py" in detail.find_element("css selector", ".patch").text
    assert "FAIL_TO_PASS" in detail.find_element("css selector", ".tests").text
    assert console_errors(browser) == []


def test_a_workflow_run_shows_its_graph_with_node_states(browser: Any, tmp_path: Path, capsys) -> None:
    assert run(["run", str(ROOT / "tests/graph/approval.yaml"), "-o", str(tmp_path), "--input",
                json.dumps({"topic": "otel"}), "--json"]) == 0
    (run_dir,) = [p.parent for p in tmp_path.glob("*/run.json")]
    out, err = capsys.readouterr()
    assert json.loads(out.strip().splitlines()[-1])["status"] == "interrupted"  # stdout stays JSON lines
    assert f"agentflow view {run_dir}" in err
    open_view(browser, run_dir)
    state = {g.get_attribute("data-node"): g.get_attribute("class")
             for g in browser.find_elements("css selector", "svg.graph g[data-node]")}
    assert state["write"] == "done" and state["review"] == "paused" and state["publish"] == ""
    browser.find_element("css selector", "#timeline .tl-row[data-kind='node']").click()
    detail = browser.find_element("id", "detail")
    assert detail.get_attribute("hidden") is None and detail.find_element("css selector", "h2").text == "node write"
    assert "node.start · node write" in detail.text and "[object" not in detail.text
    assert console_errors(browser) == []


def test_run_content_is_shown_as_text_never_run_as_html(browser: Any, tmp_path: Path) -> None:
    run_dir = write_synthetic_run(tmp_path / "evil", tasks=1, nodes_per_task=3)
    payload = "</script><script>window.pwned=1</script><img src=x onerror='window.pwned=2'>"
    cands = [json.loads(line) for line in (run_dir / "candidates.jsonl").read_text().splitlines()]
    cands[0]["patch"] = payload
    (run_dir / "candidates.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cands))
    open_view(browser, run_dir)
    html = (run_dir / "view.html").read_text()
    assert "https://" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")  # no CDN
    browser.find_element("css selector", "#search-tree > .snode > .srow").click()
    browser.find_element("css selector", "#search-tree .kids .snode .srow").click()
    assert payload in browser.find_element("css selector", ".sdetail .patch").text
    assert browser.execute_script("return window.pwned === undefined")
    assert browser.find_elements("css selector", "main img") == []
    assert console_errors(browser) == []


@pytest.mark.parametrize("make", ["missing", "not_a_run"])
def test_view_of_something_that_is_not_a_run_is_a_user_error(tmp_path: Path, make: str, capsys) -> None:
    target = tmp_path / "nothing"
    if make == "not_a_run":
        target.mkdir()
    assert run(["view", str(target)]) == 2
    err = capsys.readouterr().err
    assert ("not found" in err if make == "missing" else "is not a run directory" in err) and "Traceback" not in err


@pytest.mark.parametrize("content", [True, False])
def test_a_model_call_shows_its_messages_only_when_contents_are_recorded(
    browser: Any, tmp_path: Path, content: bool
) -> None:
    cassette = ROOT / "tests/graph/cassettes/plan_code_critique.json"
    argv = ["run", "plan_code_critique", "--model", f"replay:{cassette}", "-o", str(tmp_path),
            "--input", json.dumps({"task": "add a --verbose flag"})]
    assert run(argv + (["-c", "trace.content=true"] if content else [])) == 0  # paused at approve_plan
    (run_dir,) = [p.parent for p in tmp_path.glob("*/run.json")]
    open_view(browser, run_dir)
    assert browser.find_element("css selector", "svg.graph g[data-node='approve_plan']").get_attribute("class") == "paused"
    browser.find_element("css selector", "#timeline .tl-row[data-kind='model']").click()
    detail = browser.find_element("id", "detail")
    roles = [r.text for r in detail.find_elements("css selector", ".msg .role")]
    if content:
        assert roles[:2] == ["SYSTEM", "USER"] and "add a --verbose flag" in detail.text
        assert '"goal": "add a --verbose flag"' in detail.text  # the reply
    else:
        assert roles == [] and "message contents are not recorded" in detail.text
    assert console_errors(browser) == []


def test_serve_answers_on_loopback_with_the_page_only(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    import httpx

    run_dir = write_synthetic_run(tmp_path / "run", tasks=1, nodes_per_task=3)
    (run_dir / "secret.txt").write_text("not for the browser")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "agentflow.cli.main", "view", str(run_dir), "--serve"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = ""
        while "serving" not in line:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
        url = line.split(" at ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        page = httpx.get(url, timeout=10)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.text == (run_dir / "view.html").read_text()
        for other in ("secret.txt", "events.jsonl", "../run/report.json"):
            assert httpx.get(url + other, timeout=10).status_code == 404
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) in (0, 130)


def test_a_workflow_run_whose_workflow_is_gone_still_opens(browser: Any, tmp_path: Path) -> None:
    run_dir = tmp_path / "wf-1"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"run_id": "wf-1", "thread_id": "t", "workflow": "/gone.yaml"}))
    (run_dir / "events.jsonl").write_text(json.dumps({"ts": 1.0, "run_id": "wf-1", "kind": "run.start",
                                                      "data": {"workflow": "gone"}}) + "\n{torn")
    open_view(browser, run_dir)
    assert "no node ran" in browser.find_element("css selector", "main").text
    assert console_errors(browser) == []


def test_a_graph_search_shows_its_branches_as_a_tree(browser: Any, tmp_path: Path, capsys) -> None:
    """A workflow with a search node: its branches are nodes of a tree under the search's heading, the chosen
    one marked; the branches' own graph nodes do not count as the workflow's nodes in the graph view."""
    wf = {
        "name": "searched",
        "state": {"task": {"type": "str"}, "answer": {"type": "str"}, "score": {"type": "int"},
                  "steps": {"type": "list", "reducer": "append"}, "report": {"type": "dict"}},
        "nodes": {"go": {"search": {"strategy": "mcts", "n": 5, "value": "score", "value_scale": 10},
                         "output": "report", "next": "END",
                         "subgraph": {"name": "try", "nodes": {
                             "attempt": {"fn": "tests.graph.search_nodes:attempt", "next": "refine"},
                             "refine": {"fn": "tests.graph.search_nodes:refine", "next": "END"}}}}},
    }
    path = tmp_path / "searched.yaml"
    path.write_text(json.dumps(wf))
    assert run(["run", str(path), "-o", str(tmp_path / "runs"), "-i", '{"task": "x"}', "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["state"]["report"]
    chosen = report["chosen"]
    (run_dir,) = [p.parent for p in (tmp_path / "runs").glob("*/run.json")]
    open_view(browser, run_dir)
    main = browser.find_element("css selector", "main").text
    assert "Search: go" in main and "6 nodes" in main and f"chosen: {chosen} by value" in main
    state = {g.get_attribute("data-node"): g.get_attribute("class")
             for g in browser.find_elements("css selector", "svg.graph g[data-node]")}
    assert state["go"] == "done" and "attempt" not in state  # a branch's nodes are not the workflow's
    root_row = browser.find_element("css selector", "#search-tree > .snode > .srow")
    assert f"v={report['mean']:.2f} n={report['visits']}" in root_row.text  # the backed-up mean, not the root's 0
    root_row.click()
    kids = browser.find_elements("css selector", "#search-tree > .snode > .kids > .snode")
    assert [k.get_attribute("data-node-id") for k in kids] == ["go/b0", "go/b1"]
    kids[0].find_element("css selector", ".srow").click()
    assert "ran attempt" in kids[0].find_element("css selector", ".sdetail").text
    assert len(browser.find_elements("css selector", "#search-tree .snode.chosen")) <= 1
    assert console_errors(browser) == []


def test_clicking_a_graph_search_branch_shows_its_diff_and_tests(browser: Any, tmp_path: Path, capsys) -> None:
    """A workflow search in a workspace (each branch `b<k>` writes b<k>.txt; even ones pass their tests):
    clicking a branch shows its own workspace diff and its test result, the row its pass/fail mark."""
    import subprocess

    wf = {
        "name": "seen",
        "state": {"task": {"type": "str"}, "tests": {"type": "dict"}, "report": {"type": "dict"}},
        "nodes": {"go": {"search": {"strategy": "best_of_n", "n": 3, "value": "tests.ok", "concurrency": 1},
                         "output": "report", "next": "END",
                         "subgraph": {"name": "try", "nodes": {
                             "work": {"fn": "tests.graph.search_nodes:edit_and_test", "next": "END"}}}}},
    }
    path, ws = tmp_path / "seen.yaml", tmp_path / "ws"
    path.write_text(json.dumps(wf))
    ws.mkdir()
    (ws / "README").write_text("a repo\n")
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    assert run(["run", str(path), "-o", str(tmp_path / "runs"), "--sandbox", "local", "--workspace", str(ws),
                "-i", '{"task": "x"}', "--json"]) == 0
    capsys.readouterr()
    (run_dir,) = [p.parent for p in (tmp_path / "runs").glob("*/run.json")]
    open_view(browser, run_dir)
    browser.find_element("css selector", "#search-tree > .snode > .srow").click()
    kids = {k.get_attribute("data-node-id"): k
            for k in browser.find_elements("css selector", "#search-tree > .snode > .kids > .snode")}
    assert sorted(kids) == ["go/b0", "go/b1", "go/b2"]
    for k in (0, 1):
        branch = kids[f"go/b{k}"]
        row = branch.find_element("css selector", ".srow")
        assert ("pass" if k % 2 == 0 else "fail") in row.text
        row.click()
        detail = branch.find_element("css selector", ".sdetail").text
        assert f"+made by b{k}" in detail and f"b{k + 1}.txt" not in detail  # its own diff, nobody else's
        assert f'"summary": "b{k}: {"pass" if k % 2 == 0 else "fail"}"' in detail
    assert console_errors(browser) == []
