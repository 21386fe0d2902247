"""The prompts of the code-generation node types (plain `str.format` templates: short and concrete, so a
1.5B model follows them)."""

from __future__ import annotations

SYSTEM = "You are an expert Python programmer."

WRITE = """Complete this Python function.

```python
{prompt}
```
{plan}
Reply with the complete function (signature included) in one ```python block."""

PLAN_GIVEN = """
Follow this plan:
{plan}
"""

PLAN = """Write a step-by-step plan (numbered steps, no code) for implementing this function:

```python
{prompt}
```"""

REVISE_PLAN = """This plan for the function below was checked by simulating it on the examples, and the \
simulation disagrees with the expected output.

```python
{prompt}
```

Plan:
{plan}

Simulation:
{trace}

Write a corrected step-by-step plan (numbered steps, no code) that gives the expected outputs."""

SIMULATE_PLAN = """Check this plan by simulating it by hand, step by step, on the examples.

```python
{prompt}
```

Plan:
{plan}

Examples:
{examples}

For each example, follow the plan step by step and write the output it gives. Then end with exactly one line: \
`VERDICT: MATCH` if the plan gives every expected output, else `VERDICT: MISMATCH`."""

SIMULATE_CODE = """This code fails a test. Simulate it by hand, line by line, on the failing input and find \
where it goes wrong.

```python
{code}
```

Failing test: {failure}

Trace the variables step by step, then say which line is wrong and why."""

DEBUG = """Fix this function.

```python
{prompt}
```

Current code:
```python
{code}
```

Failing tests:
{failures}

Simulation of the failing case:
{trace}

Reply with the corrected complete function in one ```python block."""
