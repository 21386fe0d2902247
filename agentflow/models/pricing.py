"""USD prices per million tokens of well-known models, and the cost of a call.

Prices are list prices as published by the providers (checked 2025); pass `price_in_per_mtok` /
`price_out_per_mtok` to `load_model` to override them. Unknown models cost None; local models cost 0.
"""

from __future__ import annotations

from agentflow.models.base import Usage

# (input, output) USD per million tokens; a dated model name matches its longest listed prefix.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5": (1.25, 10.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-opus-4": (15.00, 75.00),
    "claude-opus-4-5": (5.00, 25.00),
}


def lookup_price(model: str) -> tuple[float, float] | None:
    """Prices of `model` (longest matching prefix), or None when unknown."""
    name = model.rsplit("/", 1)[-1]
    best = max((p for p in PRICES if name.startswith(p)), key=len, default=None)
    return PRICES[best] if best is not None else None


def cost_usd(usage: Usage, prices: tuple[float, float] | None) -> float | None:
    """Cost of `usage` at `prices` (USD per million input/output tokens), None when prices are unknown."""
    if prices is None:
        return None
    return (usage.input_tokens * prices[0] + usage.output_tokens * prices[1]) / 1_000_000


_warned_unpriced: set[str] = set()


def warn_unpriced(spec: str, usd_limit: float) -> None:
    """Warn (once per model spec and process) that a USD limit cannot trip for a model without a price."""
    if spec in _warned_unpriced:
        return
    _warned_unpriced.add(spec)
    import warnings

    warnings.warn(f"the budget's USD limit ({usd_limit:g}) cannot trip for {spec}: it has no known price, so its "
                  "calls count as $0 (bound the run with a token, model-call or wall-time limit)", stacklevel=3)
