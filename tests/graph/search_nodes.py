"""Node functions for the search tests (importable as `tests.graph.search_nodes:NAME`). Each branch's
outcome is a function of its branch id (`ctx.run.branch` ends in `~b<k>`), so a test knows every value."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict


def _index(ctx: Any) -> int:
    return int(str(ctx.run.branch).rsplit("~", 1)[-1][1:])


def attempt(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    k = _index(ctx)
    return {"answer": f"a{k % 3}", "score": (k * 37) % 10, "steps": [f"attempt b{k}"]}


def refine(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    k = _index(ctx)
    return {"score": int(state.get("score") or 0) + (k * 7) % 5, "steps": [f"refine b{k}"]}


def flaky(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    k = _index(ctx)
    if k % 2:
        raise RuntimeError(f"branch b{k} broke")
    return {"answer": f"a{k}", "score": k}


def broken(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    raise RuntimeError("every branch breaks")


def _append(a: list[str] | None, b: list[str] | None) -> list[str]:
    return [*(a or []), *(b or [])]


class SearchState(TypedDict, total=False):
    """The state of the builder test's workflows."""

    task: str
    answer: str
    score: int
    steps: Annotated[list[str], _append]
    report: dict[str, Any]
