"""The collectives benchmark's interference row (tide.bench.gemm_interference.interference_row): from every
rank's GEMM times it keeps the rank that slowed most, with that rank's own times beside its slowdown,
and the fewest overlapped GEMMs of any rank. It runs only inside a GPU session otherwise.

Expected slowdowns are computed here from the drawn times, in float64, independently of the module."""

from __future__ import annotations

import math
import random

import pytest

torch = pytest.importorskip("torch")
from tide.bench.gemm_interference import interference_row  # noqa: E402


def _draw_ranks(rng: random.Random, ranks: int) -> list[list[float]]:
    rows = []
    for _ in range(ranks):
        before = rng.uniform(400.0, 600.0)
        after = before * rng.uniform(0.97, 1.03)
        rows.append([before, after, before * rng.uniform(0.9, 1.4), float(rng.randint(20, 200))])
    return rows


@pytest.mark.parametrize("ranks", [1, 2, 4, 8])
def test_the_row_is_the_worst_ranks_with_its_own_times(ranks):
    rng = random.Random()
    for _ in range(50):
        per_rank = _draw_ranks(rng, ranks)
        expected = [d / ((b + a) / 2.0) - 1.0 for b, a, d, _ in per_rank]
        worst = max(range(ranks), key=lambda r: expected[r])
        row = interference_row("sys", "grp", per_rank)
        assert row["times_of_rank"] == worst
        b, a, d, _ = per_rank[worst]
        assert (row["gemm_alone_before_us"], row["gemm_alone_after_us"], row["gemm_during_us"]) == (b, a, d)
        assert row["gemm_alone_us"] == pytest.approx((b + a) / 2.0, rel=1e-15)
        assert row["slowdown_pct"] == pytest.approx(100 * max(expected), rel=1e-12)
        assert row["overlapped"] == min(int(r[3]) for r in per_rank)
        assert (row["system"], row["group"]) == ("sys", "grp")


def test_a_rank_without_a_valid_median_is_the_worst():
    per_rank = [[500.0, 500.0, 900.0, 50.0], [500.0, 500.0, math.nan, 3.0], [500.0, 500.0, 510.0, 60.0]]
    row = interference_row("sys", "grp", per_rank)
    assert row["times_of_rank"] == 1
    assert row["slowdown_pct"] == math.inf
    assert row["overlapped"] == 3


def test_ties_go_to_the_lowest_rank():
    per_rank = [[500.0, 500.0, 500.0, 40.0], [400.0, 400.0, 480.0, 40.0], [500.0, 500.0, 600.0, 40.0]]
    row = interference_row("sys", "grp", per_rank)
    assert row["times_of_rank"] == 1
    assert row["slowdown_pct"] == pytest.approx(20.0)
