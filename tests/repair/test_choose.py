"""Choosing the submission: tests first, then what the issue's examples show, then the vote of the model's own edits."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agentflow.budget import Budget
from agentflow.events import EventLog
from agentflow.models.base import ChatRequest
from agentflow.models.testing import FunctionModel
from agentflow.repair.locate.spectrum import ExampleRun, examples_changed, examples_shown
from agentflow.repair.outcome import Candidate
from agentflow.repair.verify.choose import ChooseSettings, choose
from agentflow.repair.verify.workbench import Verification
from tests.repair.conftest import TASKS_FILE, verified


def _attempt(cand: str, patch: str, sample: int, part_of: str | None = None) -> Candidate:
    return verified(cand, patch, Verification(kind="test_cmd", passed=None, score=0.5), sample, part_of)


async def test_parts_of_a_split_edit_are_candidates_but_cast_no_vote():
    a = _attempt("t/c1", "diff-a\n", 1)
    b = _attempt("t/c2", "diff-b\n", 2)
    part = _attempt("t/c1.1", "diff-b\n", 1, part_of="t/c1")  # the same change as c2, split out of c1
    best, by = await choose([a, b, part], ChooseSettings(vote=True), None, "issue", Budget(), EventLog())
    # one sample each: a tie the earliest sample wins; counting the part, c2's patch would have won 2 to 1
    assert best is a and by == "tests"
    better = verified("t/c1.2", "diff-c\n", Verification(kind="test_cmd", passed=True, score=1.0), 1, "t/c1")
    best, by = await choose([a, b, part, better], ChooseSettings(vote=True), None, "issue", Budget(), EventLog())
    assert best is better and by == "tests"  # a part that passes is chosen by the tests like any candidate


def _passing(cand: str, patch: str, sample: int) -> Candidate:
    return verified(cand, patch, Verification(kind="test_cmd", passed=None, score=1.0), sample, None)


async def test_the_verifier_model_breaks_a_tie_of_tests_and_vote_and_is_held_against_the_budget():
    # equal tests and votes: without a judgement the smaller patch (c2) would be chosen
    tied = [_passing("t/c1", "diff-split-at-the-first-sign\n", 1), _passing("t/c2", "diff-split-twice\n", 2)]

    def judge(request: ChatRequest) -> str:
        asked = request.messages[-1].content or ""
        return json.dumps({"score": 0.9 if "first-sign" in asked else 0.2, "evidence": ["what it splits"]})

    budget, verifier = Budget(), FunctionModel(judge)
    best, by = await choose(tied, ChooseSettings(), verifier, "split at the first '=' only", budget, EventLog())
    assert best is tied[0] and by == "verifier"
    assert sorted(r.messages[-1].content for r in verifier.requests) == [
        f"Task:\nsplit at the first '=' only\n\nFinal output of the agent:\n{a.patch}" for a in tied]
    assert budget.used.model_calls == 2  # a model that does not charge the budget itself is charged here

    # a judgement that does not validate (after the retry), or a call the budget refuses, scores nothing
    best, by = await choose(tied, ChooseSettings(), FunctionModel(lambda r: "looks fine"), "issue", Budget(),
                            EventLog())
    assert best is tied[1] and by == "tests"
    spent = Budget(model_calls=0)
    best, by = await choose(tied, ChooseSettings(), FunctionModel(judge), "issue", spent, EventLog())
    assert best is tied[1] and by == "tests" and spent.used.model_calls == 0


async def test_what_the_examples_show_decides_before_the_vote():
    """Three samples agree on a rewrite that leaves the report's behaviour as it was; the one that changes it is
    chosen, by the examples. When every candidate (or none) changes it, the vote decides as before."""
    same = [_passing(f"t/c{i}", "diff-same\n", i) for i in range(3)]
    fix = _passing("t/c3", "diff-fix\n", 3)
    cfg = ChooseSettings(vote=True)
    best, by = await choose([*same, fix], cfg, None, "issue", Budget(), EventLog(),
                            {"diff-same": False, "diff-fix": True})
    assert best is fix and by == "examples"
    for all_or_none in (True, False):
        best, by = await choose([*same, fix], cfg, None, "issue", Budget(), EventLog(),
                                {"diff-same": all_or_none, "diff-fix": all_or_none})
        assert best is same[0] and by == "vote"
    # the tests still come first: a candidate that changes the examples but fails a test is not chosen
    failing = verified("t/c4", "diff-x\n", Verification(kind="test_cmd", passed=False, score=0.5), 4, None)
    best, by = await choose([fix, failing], cfg, None, "issue", Budget(), EventLog(), {"diff-fix": False, "diff-x": True})
    assert best is fix and by == "tests"


async def test_samples_whose_candidates_show_the_same_outvote_a_patch_written_twice():
    """cachette-2 (stats of an unused cache divide by zero): three samples fix `hit_rate` three ways and the
    report then shows `0.0`; two write the same `as_dict` workaround, which shows `None`. Counting equal patches
    the workaround wins 2 to 1; counting what the examples show, the fix wins 3 to 2, and among its samples the
    patch more of them wrote (none here: the smallest) is submitted."""
    fixes = [_passing(f"t/c{i}", f"diff-fix-{i}\n" + "x" * i, i) for i in range(3)]
    workaround = [_passing(f"t/c{i}", "diff-workaround\n", i) for i in (3, 4)]
    shown = {"diff-fix-0": ("{'hit_rate': 0.0}\n",), "diff-fix-1\nx": ("{'hit_rate': 0.0}\n",),
             "diff-fix-2\nxx": ("{'hit_rate': 0.0}\n",), "diff-workaround": ("{'hit_rate': None}\n",)}
    events = EventLog()
    best, by = await choose([*fixes, *workaround], ChooseSettings(), None, "issue", Budget(), events, shown=shown,
                            instance_id="t")
    assert best is fixes[0] and by == "behaviour_vote"
    assert [(e.node_id, e.data["instance_id"], e.data["patch_vote_choice"])
            for e in events.events if e.kind == "repair.vote"] == [("t", "t", "t/c3")]
    for cfg, known in ((ChooseSettings(vote_by_examples=False), shown), (ChooseSettings(), {})):
        best, by = await choose([*fixes, *workaround], cfg, None, "issue", Budget(), EventLog(), shown=known)
        assert best is workaround[0] and by == "vote"
    # a candidate whose examples gave no report votes by its patch: it joins no behaviour
    best, by = await choose([*fixes, *workaround], ChooseSettings(), None, "issue", Budget(), EventLog(),
                            shown={k: v for k, v in shown.items() if not k.startswith("diff-fix-2")})
    assert best is workaround[0] and by == "vote"
    # a lead of equal patches that change nothing the report shows (cachette-1's look-alike, three times over
    # one fix) is the plain vote's, not the behaviour vote's
    lookalike = [_passing(f"t/c{i}", "diff-lookalike\n", i) for i in (5, 6, 7)]
    events = EventLog()
    best, by = await choose([*lookalike, fixes[0]], ChooseSettings(), None, "issue", Budget(), events,
                            shown={"diff-fix-0": ("True\n",)}, instance_id="t")
    assert best is lookalike[0] and by == "vote"
    assert not [e for e in events.events if e.kind == "repair.vote"]


async def test_the_keep_working_check_decides_among_candidates_that_fix_the_reproduction():
    """inikit-3: three samples agree on `int(raw, 10)`, which breaks hex; the check of what must keep working
    (hex) holds on the one fix, chosen before the examples and the vote. It is not used among candidates that
    leave the reproduction failing: a check that asserts the bug would prefer them."""
    def fixed(cand: str, patch: str, sample: int) -> Candidate:  # blind mode: the tests pass, the script too
        return verified(cand, patch, Verification(kind="test_cmd", passed=None, score=1.0, reproduced=False), sample,
                       None)

    decimal = [fixed(f"t/c{i}", "diff-decimal\n", i) for i in range(3)]
    fix = fixed("t/c3", "diff-fix\n", 3)
    cfg = ChooseSettings(vote=True)
    keeps = {"diff-decimal": False, "diff-fix": True}
    best, by = await choose([*decimal, fix], cfg, None, "issue", Budget(), EventLog(),
                            {"diff-decimal": True, "diff-fix": False}, keeps=keeps)
    assert best is fix and by == "keep_check"
    best, by = await choose([*decimal, fix], cfg, None, "issue", Budget(), EventLog(), keeps={})
    assert best is decimal[0] and by == "vote"
    for every in (True, False):  # a check all or none pass tells nothing
        best, by = await choose([*decimal, fix], cfg, None, "issue", Budget(), EventLog(),
                                keeps={"diff-decimal": every, "diff-fix": every})
        assert best is decimal[0] and by == "vote"
    def still_failing(cand: str, patch: str, sample: int) -> Candidate:  # the reproduction still fails on it
        return verified(cand, patch, Verification(kind="test_cmd", passed=False, score=0.5, reproduced=True), sample,
                       None)

    for make in (still_failing, _passing):  # the reproduction still fails, or there is none
        unfixed = [make(f"t/u{i}", "diff-decimal\n", i) for i in range(3)] + [make("t/u3", "diff-fix\n", 3)]
        best, by = await choose(unfixed, cfg, None, "issue", Budget(), EventLog(), keeps=keeps)
        assert best is unfixed[0] and by == "vote"


def test_examples_that_cannot_tell_compare_nothing():
    def run(*shown: str, called: bool = True) -> ExampleRun:
        return ExampleRun(len(shown), (("m.py", "f"),) if called else (), "", shown)

    base = run("False\n")
    assert examples_changed(base, run("False\n"), {"a": run("True\n"), "b": run("False\n"), "c": ExampleRun()}) == \
        {"a": True, "b": False, "c": False}  # a run without a report never counts as a change
    assert examples_shown(base, run("False\n"), {"a": run("True\n"), "b": run("False\n"), "c": ExampleRun()}) == \
        {"a": ("True\n",)}  # what changes nothing is no behaviour to agree on
    assert examples_changed(base, run("True\n"), {"a": run("True\n")}) == {}  # the base differs run to run
    assert examples_shown(base, run("True\n"), {"a": run("True\n")}) == {}
    assert examples_changed(run("raised NameError: name 'cfg' is not defined\n", called=False),
                            run("raised NameError: name 'cfg' is not defined\n", called=False),
                            {"a": run("x\n")}) == {}  # the snippet never reached the repository


CONTAINS_MOVES = '''diff --git a/cachette/lru.py b/cachette/lru.py
--- a/cachette/lru.py
+++ b/cachette/lru.py
@@ -21,7 +21,10 @@ class LRUCache:
         return len(self._data)
 
     def __contains__(self, key):
-        return key in self._data
+        if key in self._data:
+            self._data.move_to_end(key)
+            return True
+        return False
 
     def get(self, key, default=None):
         value = self._data.get(key, _MISSING)
'''


@pytest.mark.docker
async def test_in_a_real_sandbox_the_fix_changes_what_the_report_shows_and_the_lookalike_does_not(docker_image: str):
    """cachette-1 (`get` does not mark the entry used): the report's block ends with `"alice" in cache`, False.
    A sample from the embedded model made `__contains__` mark it instead (the repository's tests pass, three
    samples agreed on it): the block still shows False. The fix in `get` makes it True."""
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.edit.steps import issue_text
    from agentflow.repair.verify.workbench import Workbench
    from agentflow.sandbox import open_sandbox
    from agentflow.swe.tasks import load_tasks

    task = next(t for t in load_tasks(TASKS_FILE) if t.instance_id == "cachette__cachette-1")
    cfg = load_repair_config(["backend=docker", f"sandbox.image={docker_image}"])
    issue = issue_text(task.problem_statement, task.hints_text)
    async with open_sandbox("docker", cfg.sandbox) as sandbox:
        bench = Workbench(sandbox, task, cfg, "python3")
        await bench.setup()
        sources = await bench.python_sources()
        base = await bench.show_examples("", issue, sources)
        again = await bench.show_examples("", issue, sources)
        runs = {p: await bench.show_examples(p, issue, sources) for p in (CONTAINS_MOVES, task.patch)}
        left, _ = await bench.diff()
    assert base.shown == ("False\n",) and ("cachette/lru.py", "LRUCache.get") in base.called
    assert runs[task.patch].shown == ("True\n",)
    assert examples_changed(base, again, runs) == {CONTAINS_MOVES: False, task.patch: True}
    assert left == ""  # the workspace is back at the base commit


DECIMAL_ONLY = '''diff --git a/inikit/values.py b/inikit/values.py
--- a/inikit/values.py
+++ b/inikit/values.py
@@ -25,7 +25,7 @@ def to_bool(raw):
 
 def to_int(raw):
     try:
-        return int(raw.strip(), 0)
+        return int(raw.strip(), 10)
     except ValueError:
         raise ConversionError(f"not an integer: {raw!r}") from None
 
'''

KEEPS_HEX = 'from inikit import loads\n\ncfg = loads("[job]\\nmask = 0x1F\\n")\nassert cfg.getint("job", "mask") == 31\n'


def test_a_keep_working_check_is_cut_down_to_what_holds_today():
    """The model's check of inikit-3 asserts the reported case ("03") beside hex: each top-level check runs on its
    own, and the one kept is the script without those that failed at the base commit."""
    from agentflow.repair.verify.keepcheck import (
        instrumented,
        passed_checks,
        passing_only,
        why_not_a_keep_check,
    )

    sources = {"inikit/values.py": "", "tests/test_values.py": "", "setup.py": ""}
    assert why_not_a_keep_check(KEEPS_HEX, sources) is None
    assert "imports none" in (why_not_a_keep_check("assert int('0x1F', 0) == 31\n", sources) or "")
    assert "imports none" in (why_not_a_keep_check("import tests.test_values\nassert tests\n", sources) or "")
    assert "checks nothing" in (why_not_a_keep_check("import inikit\nx = inikit.loads('')\n", sources) or "")
    assert "does not parse" in (why_not_a_keep_check("assert (\n", sources) or "")
    # statements: 0 import, 1 set-up, 2 a failing check, 3 and 4 passing ones (one of them a try)
    script = ('import json\nvalue = json.loads("3")\nassert value == 4\nassert value == 3\n'
              'try:\n    json.loads("{")\nexcept ValueError:\n    pass\n')
    run = subprocess.run([sys.executable, "-c", instrumented(script)], capture_output=True, text=True, check=True)
    assert passed_checks(run.stdout) == {3, 4}
    kept = passing_only(script, {3, 4}) or ""
    assert "value == 4" not in kept and "value == 3" in kept and "except ValueError" in kept
    subprocess.run([sys.executable, "-c", kept], check=True)
    assert passing_only(script, set()) is None and passing_only(script, {1}) is None  # set-up is no check


@pytest.mark.docker
async def test_in_a_real_sandbox_the_keep_working_check_tells_the_fix_from_the_decimal_only_rewrite(docker_image: str):
    """inikit-3 (zero-padded numbers rejected; hex must keep working): the model's check asserts the reported
    case and hex; cut down to hex, it is kept, still passes on the fix and fails on the embedded model's
    `int(raw, 10)` samples. A check of the reported case alone has nothing left and is refused."""
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.verify.workbench import Workbench
    from agentflow.sandbox import open_sandbox
    from agentflow.swe.tasks import load_tasks

    task = next(t for t in load_tasks(TASKS_FILE) if t.instance_id == "inikit__inikit-3")
    cfg = load_repair_config(["backend=docker", f"sandbox.image={docker_image}"])
    reported = 'from inikit import loads\n\nassert loads("[job]\\nretries = 03\\n").getint("job", "retries") == 3\n'
    answer = reported + KEEPS_HEX.replace("from inikit import loads\n\n", "")
    async with open_sandbox("docker", cfg.sandbox) as sandbox:
        bench = Workbench(sandbox, task, cfg, "python3")
        await bench.setup()
        sources = await bench.python_sources()
        check, _ = await bench.install_keep_check(answer, sources)
        only_reported, refused = await bench.install_keep_check(reported, sources)
        held = {name: await bench.keeps_working(patch, check or "") for name, patch in
                (("fix", task.patch), ("decimal", DECIMAL_ONLY), ("none", ""))}
        left, _ = await bench.diff()
    assert check is not None and "0x1F" in check and "retries" not in check
    assert only_reported is None and "none of its checks passes" in refused and "ConversionError" in refused
    assert held == {"fix": True, "decimal": False, "none": True}
    assert left == ""  # the workspace is back at the base commit


async def test_a_candidate_that_changes_no_code_is_not_submitted_when_the_tests_fail_at_the_base():
    """Three samples reword a docstring, one changes code; none passes the tests, so the vote would pick the
    docstring. The tests fail at the base commit, so a change of no code cannot be the fix: it is left out, and
    with only such candidates nothing is submitted. When the tests pass at the base, the choice is as before
    (the caller flags the submitted noop)."""
    failing = Verification(kind="task_tests", passed=False, score=0.5)
    docs = [verified(f"t/c{i}", "diff-docstring\n", failing, i, None) for i in range(3)]
    code = verified("t/c3", "diff-code\n", failing, 3, None)
    noops = {"diff-docstring": True, "diff-code": False}
    cfg = ChooseSettings(vote=True)
    assert (await choose([*docs, code], cfg, None, "issue", Budget(), EventLog()))[0] is docs[0]  # the vote
    events = EventLog()
    best, by = await choose([*docs, code], cfg, None, "issue", Budget(), events, noops=noops, base_failed=True,
                            instance_id="t")
    assert best is code and by == "only"
    assert [e.data for e in events.events if e.kind == "repair.noop"] == [{"instance_id": "t", "left_out": 3,
                                                                          "among": 4}]
    events = EventLog()
    assert await choose(docs, cfg, None, "issue", Budget(), events, noops=noops, base_failed=True) == (None, "noop")
    assert [e.data["left_out"] for e in events.events if e.kind == "repair.noop"] == [3]
    for base_failed in (False, None):  # the tests pass at the base, or cannot tell: nothing is left out
        best, by = await choose([*docs, code], cfg, None, "issue", Budget(), EventLog(), noops=noops,
                                base_failed=base_failed)
        assert best is docs[0] and by == "vote"
    # the tests pass on it while they fail at the base: what it changes is behaviour after all (a docstring a
    # test reads), so it stays
    read = verified("t/c4", "diff-docstring\n", Verification(kind="task_tests", passed=True, score=1.0), 4, None)
    best, by = await choose([read, code], cfg, None, "issue", Budget(), EventLog(), noops=noops, base_failed=True)
    assert best is read and by == "tests"


def test_the_tests_fail_at_the_base_when_its_verification_did_not_pass():
    from agentflow.repair.verify.choose import tests_fail_at_base

    assert tests_fail_at_base(Verification(kind="task_tests", passed=False)) is True  # FAIL_TO_PASS fail there
    assert tests_fail_at_base(Verification(kind="test_cmd", passed=False, reproduced=True)) is True  # a kept script
    assert tests_fail_at_base(Verification(kind="test_cmd", passed=True)) is False  # nothing shows the bug
    assert tests_fail_at_base(Verification(kind="none")) is None
    assert tests_fail_at_base(None) is None
