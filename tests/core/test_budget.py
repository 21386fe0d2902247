import time

import pytest

from agentflow.budget import Budget, BudgetExceeded


def test_usage_counts_without_limits() -> None:
    b = Budget()
    b.charge_model(tokens=100, usd=0.5)
    b.charge_tool()
    assert b.exceeded() is None
    assert (b.used.tokens, b.used.usd, b.used.model_calls, b.used.tool_calls) == (100, 0.5, 1, 1)


@pytest.mark.parametrize(
    ("kind", "charge"),
    [
        ("tokens", lambda b: b.charge_model(tokens=50)),
        ("usd", lambda b: b.charge_model(usd=0.02)),
        ("model_calls", lambda b: b.charge_model()),
        ("tool_calls", lambda b: b.charge_tool()),
    ],
)
def test_each_kind_stops_at_its_limit(kind: str, charge) -> None:
    limit = {"tokens": 100, "usd": 0.05, "model_calls": 3, "tool_calls": 3}[kind]
    b = Budget(**{kind: limit})
    steps = 0
    while b.exceeded() is None:
        charge(b)
        steps += 1
        assert steps < 100
    assert b.exceeded() == kind
    with pytest.raises(BudgetExceeded) as exc:
        b.check()
    assert exc.value.kind == kind


def test_wall_seconds() -> None:
    b = Budget(wall_seconds=0.05)
    assert b.exceeded() is None
    time.sleep(0.06)
    assert b.exceeded() == "wall_seconds"


def test_child_charges_parent_and_parent_limit_applies_to_child() -> None:
    parent = Budget(model_calls=5)
    child = parent.child(model_calls=2)
    child.charge_model()
    child.charge_model()
    assert child.exceeded() == "model_calls"
    assert parent.used.model_calls == 2 and parent.exceeded() is None
    other = parent.child()
    for _ in range(3):
        other.charge_model()
    assert other.exceeded() == "model_calls"  # the parent's limit is reached
    assert other.remaining("model_calls") == 0


def test_remaining_is_tightest() -> None:
    parent = Budget(tokens=1000)
    child = parent.child(tokens=100)
    child.charge_model(tokens=40)
    assert child.remaining("tokens") == 60
    assert parent.remaining("tokens") == 960
    assert Budget().remaining("tokens") is None


def test_what_is_left_travels_and_what_was_used_elsewhere_is_charged() -> None:
    """A step run on another node gets what is left as its own limits and hands back what it used."""
    parent = Budget(tokens=1000, tool_calls=5)
    run = parent.child(usd=1.0)
    run.charge_model(tokens=300, usd=0.25)
    left = run.left()
    assert (left.tokens, left.usd, left.tool_calls, left.model_calls) == (700, 0.75, 5, None)
    elsewhere = Budget(left)
    elsewhere.charge_model(tokens=100, usd=0.5, calls=2)
    elsewhere.charge_tool(2)
    run.charge(elsewhere.used)
    used = run.used
    assert (used.tokens, used.usd, used.model_calls, used.tool_calls) == (400, 0.75, 3, 2)
    assert parent.used.tool_calls == 2 and run.remaining("usd") == 0.25
