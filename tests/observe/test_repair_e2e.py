"""Replayed repairs in the Docker sandbox: a best-of-N repair's spans at a real OTLP/HTTP receiver, and an MCTS
repair's viewer in headless Chromium. The repair searches on the graph layer: its branches are spans of their
own holding the graph nodes they ran, and the viewer shows each branch's candidate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run
from tests.repair.conftest import CASSETTES, TASKS_FILE, read_jsonl

from .conftest import Receiver, console_errors
from .test_viewer import open_view

pytestmark = pytest.mark.docker


def repair(out: Path, image: str, iid: str, cassette: str, *args: str) -> int:
    return run(["repair", "--tasks", str(TASKS_FILE), "-i", iid, "--model", f"replay:{CASSETTES / cassette}",
                "-c", "search.concurrency=1", "-c", "edit.format=search_replace", "-c", "tests.feedback=task", "-c", "mutants=false",
                "--sandbox", "docker", "-c", f"sandbox.image={image}", "-o", str(out), *args])


def test_a_best_of_n_repair_is_one_span_tree_at_the_collector_and_a_tree_in_the_viewer(
    docker_image: str, tmp_path: Path, otlp_receiver: Receiver, capsys, browser: Any
) -> None:
    out = tmp_path / "run"
    assert repair(out, docker_image, "inikit__inikit-1", "bon_inikit-1.json", "--strategy", "best_of_n", "-n", "3",
                  "-c", "search.max_attempts=1", "-c", f"trace.endpoint={otlp_receiver.url}") == 0
    assert f"agentflow view {out}" in capsys.readouterr().err
    r, events = otlp_receiver, read_jsonl(out / "events.jsonl")
    iid = "inikit__inikit-1"
    (root,) = [s for s in r.spans if s.parent_id == ""]
    assert root.name == "agentflow run" and {s.trace_id for s in r.spans} == {root.trace_id}
    (task,) = r.children(root)
    assert task.name == f"repair {iid}" and task.attributes["agentflow.repair.status"] == "submitted"
    assert task.attributes["agentflow.repair.resolved"] is True
    steps = [c.name for c in r.children(task)]
    assert "repair.base" in steps and "search best_of_n" in steps and "workflow repair" in steps
    # the search's tree: one span per search node, nested as the tree: the root under the search, the branches
    # under the root, each with its last update (visits, value, whether it finished)
    (search,) = r.by_name("search best_of_n")
    assert r.parent_of(search) is task
    node_ids = {e["node_id"] for e in events if e["kind"] == "search.node"}
    nodes = {s.attributes["agentflow.search.node_id"]: s for s in r.by_name("search.node ")}
    assert set(nodes) == node_ids == {f"{iid}/search", *(f"{iid}/search/b{k}" for k in range(3))}
    tree_root = nodes[f"{iid}/search"]
    assert r.parent_of(tree_root) is search
    assert all(r.parent_of(s) is tree_root for k, s in nodes.items() if k != f"{iid}/search")
    final = {e["node_id"]: e["data"] for e in events if e["kind"] == "search.node"}  # the last update wins
    for node_id, span in nodes.items():
        assert span.attributes["agentflow.search.visits"] == final[node_id]["visits"]
        assert span.attributes["agentflow.search.value"] == final[node_id]["value"]
        assert span.attributes["agentflow.search.terminal"] is final[node_id]["terminal"]
    # each branch is a span under the workflow's search node, holding the graph nodes it ran
    (search_node,) = r.by_name(f"node {iid}/search")
    branch_spans = {s.attributes["agentflow.search.branch"]: s for s in r.by_name("branch ")}
    assert set(branch_spans) == {f"{iid}/search/b{k}" for k in range(3)}
    assert all(r.parent_of(b) is search_node for b in branch_spans.values())
    for branch in branch_spans.values():
        assert [c.name for c in r.children(branch)] == [f"node {iid}/edit", f"node {iid}/test"]
    # the samples' model calls are GenAI chat spans in the edit node that drew them (the ranking's in the task)
    chats = [s for s in r.spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == sum(1 for e in events if e["kind"] == "model.call")
    for chat in chats:
        assert chat.attributes["gen_ai.provider.name"] == "replay"
        assert chat.attributes["gen_ai.usage.input_tokens"] == 100 or chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.response.finish_reasons"]
    samples = sum(1 for e in events if e["kind"] == "model.call" and e["node_id"] != iid)
    in_edits = [c for c in chats if r.parent_of(c).name == f"node {iid}/edit"]
    assert len(in_edits) == samples >= 3 and all(r.parent_of(r.parent_of(c)) in branch_spans.values() for c in in_edits)
    # attempts carry their verification, in the test node of the branch that made them
    attempts = r.by_name("apply ")
    made = {e["node_id"]: e["data"]["branch"] for e in events if e["kind"] == "repair.attempt"}
    assert len(attempts) == len(made) >= 2
    assert {a.attributes["agentflow.attempt.passed"] for a in attempts} == {True, False}
    for a in attempts:
        node = r.parent_of(a)
        assert node.name == f"node {iid}/test"
        assert r.parent_of(node) is branch_spans[f"{iid}/search/{made[a.attributes['agentflow.candidate_id']]}"]
    assert all(a.end_ns > a.start_ns for a in attempts)  # the attempt's own duration
    # the sandbox commands are spans too, with their exit codes, inside the task
    execs = r.by_name("sandbox.exec")
    assert len(execs) == sum(1 for e in events if e["kind"] == "sandbox.exec") > 0
    assert all("process.exit.code" in s.attributes for s in execs)
    for span in r.spans:  # every span inside its parent's time
        parent = r.parent_of(span)
        if parent is not None:
            assert parent.start_ns <= span.start_ns and span.end_ns <= parent.end_ns, (span.name, parent.name)

    # the viewer: each branch's node shows its candidate (the chosen one, else its best); the chosen one is marked
    open_view(browser, out)
    browser.find_element("css selector", "#search-tree > .snode > .srow").click()
    rollouts = browser.find_elements("css selector", "#search-tree > .snode > .kids > .snode")
    assert len(rollouts) == 3
    chosen = json.loads((out / "instances" / "inikit__inikit-1" / "outcome.json").read_text())["chosen"]
    (marked,) = browser.find_elements("css selector", ".snode.chosen")
    marked.find_element("css selector", ".srow").click()
    detail = marked.find_element("css selector", ".sdetail").text
    assert f"candidate {chosen}" in detail and "FAIL_TO_PASS: 1 pass, 0 fail" in detail
    assert console_errors(browser) == []


def test_the_viewer_of_an_mcts_repair_expands_a_node_to_its_patch_and_tests(
    docker_image: str, tmp_path: Path, browser: Any
) -> None:
    out = tmp_path / "run"
    assert repair(out, docker_image, "verspec__verspec-2", "mcts_verspec-2.json", "--strategy", "mcts", "-n", "2") == 0
    open_view(browser, out)
    main = browser.find_element("css selector", "main").text
    chosen = json.loads((out / "instances" / "verspec__verspec-2" / "outcome.json").read_text())["chosen"]
    assert f"chosen: {chosen} by tests" in main
    browser.find_element("css selector", "#search-tree > .snode > .srow").click()  # the root: open its children
    child = browser.find_element("css selector", "#search-tree > .snode > .kids > .snode")
    child.find_element("css selector", ".srow").click()
    detail = child.find_element("css selector", ".sdetail")
    cand_id = detail.find_element("css selector", "b").text
    cand = next(c for c in read_jsonl(out / "candidates.jsonl") if c["candidate_id"] == cand_id)
    patch = detail.find_element("css selector", ".patch").text
    assert patch.strip() == cand["patch"].strip() and "verspec/version.py" in patch
    failing = cand["verification"]["tests_status"]["FAIL_TO_PASS"]["failure"]
    tests = detail.find_element("css selector", ".tests[data-group='FAIL_TO_PASS']").text
    assert f"{len(failing)} fail" in tests and all(t in tests for t in failing)
    # the chosen candidate is marked on its node, deeper in the tree
    while not browser.find_elements("css selector", ".snode.chosen"):
        closed = [t for t in browser.find_elements("css selector", ".snode > .srow .toggle") if t.text == "▸"]
        assert closed, "the chosen node is not in the tree"
        closed[0].click()
    assert "chosen" in browser.find_element("css selector", ".snode.chosen > .srow").text
    assert console_errors(browser) == []


def test_the_viewer_of_an_eval_lists_instances_and_their_graded_tests(
    docker_image: str, tmp_path: Path, browser: Any
) -> None:
    gold = TASKS_FILE.parent / "gold.jsonl"
    out = tmp_path / "eval"
    assert run(["eval", str(gold), "--tasks", str(TASKS_FILE), "-i", "inikit__inikit-1", "-i", "tabkit__tabkit-2",
                "--sandbox", "docker", "-c", f"sandbox.image={docker_image}", "-o", str(out)]) == 0
    open_view(browser, out)
    rows = {r.get_attribute("data-instance"): r.text for r in browser.find_elements("css selector", "#instances tbody tr")}
    assert set(rows) == {"inikit__inikit-1", "tabkit__tabkit-2"} and all("yes" in t for t in rows.values())
    browser.find_element("link text", "inikit__inikit-1").click()
    # the instance page renders after the click: wait for it rather than racing it (a clean-clone CI run lost)
    from selenium.webdriver.support.ui import WebDriverWait
    graded = WebDriverWait(browser, 10).until(lambda b: b.find_elements("id", "graded"))[0].text
    report = json.loads((out / "report.json").read_text())["instances"]["inikit__inikit-1"]["tests_status"]
    assert f"FAIL_TO_PASS: {len(report['FAIL_TO_PASS']['success'])} pass, 0 fail" in graded
    assert 'parts = stripped.split("=", 1)' in browser.find_element("css selector", "main").text  # the patch
    assert console_errors(browser) == []
