"""The pass@k estimator of the search report."""

from __future__ import annotations

import itertools
from math import comb

import pytest

from agentflow.search.passk import pass_at_k, pass_at_ks


@pytest.mark.parametrize("n,c,k", [(5, 0, 1), (5, 1, 1), (5, 2, 3), (10, 3, 4), (7, 7, 2), (6, 5, 2), (20, 1, 20)])
def test_pass_at_k_matches_the_combinatorial_definition(n: int, c: int, k: int) -> None:
    expected = 1 - comb(n - c, k) / comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_equals_the_share_of_k_subsets_that_hold_a_correct_sample() -> None:
    samples = [True, False, False, True, False, False]
    for k in range(1, len(samples) + 1):
        subsets = list(itertools.combinations(samples, k))
        share = sum(any(s) for s in subsets) / len(subsets)
        assert pass_at_k(len(samples), sum(samples), k) == pytest.approx(share)


def test_pass_at_ks_picks_powers_of_two_and_n() -> None:
    assert list(pass_at_ks(10, 2)) == [1, 2, 4, 8, 10]
    assert pass_at_ks(10, 2)[1] == pytest.approx(0.2)
    assert pass_at_ks(0, 0) == {}
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
