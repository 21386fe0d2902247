"""pass@k with the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on Code").

With n samples of which c are correct, pass@k = 1 - C(n-c, k) / C(n, k): the chance that k samples drawn
without replacement from the n contain at least one correct one. Computed as a product for stability.
"""

from __future__ import annotations


def pass_at_k(n: int, c: int, k: int) -> float:
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got n={n} c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n, got n={n} k={k}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def pass_at_ks(n: int, c: int, ks: tuple[int, ...] | None = None) -> dict[int, float]:
    """pass@k for k = 1, 2, 4, ... up to n, plus n itself (or the given ks that are <= n)."""
    if n == 0:
        return {}
    if ks is None:
        chosen, k = [], 1
        while k < n:
            chosen.append(k)
            k *= 2
        chosen.append(n)
    else:
        chosen = [k for k in ks if 1 <= k <= n]
    return {k: pass_at_k(n, c, k) for k in chosen}
