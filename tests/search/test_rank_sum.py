"""The least summed time of the pipeline ranks under memory (``search.rank_sum``): the greedy
allocation equals brute force over every way of sharing the blocks, the per-block time is the linear
program's over mixes of modes, and the floor it adds stays below every fitting configuration
(``tests/search/test_bounds.py`` checks the whole bound against the exhaustive solver)."""

from __future__ import annotations

import itertools
import math

from costmodel.specs import ParallelConfig
from costmodel.table import build_cost_table
from search.pressure import rank_model
from search.rank_sum import _rank_cost_fn, least_sums, least_time
from tests.search.test_bounds import model
from tests.search.test_exhaustive_matches_search import small_cluster


def test_least_time_is_the_best_mix_within_the_budget() -> None:
    points = [(1.0, 10.0), (1.5, 4.0), (2.0, 1.0)]
    assert least_time(points, 20.0) == 1.0
    assert math.isclose(least_time(points, 7.0), 1.25)  # half of each of the first two modes
    assert least_time(points, 1.0) == 2.0
    assert least_time(points, 0.5) == math.inf
    # brute force over mixes of two modes on a fine grid never beats it
    for budget in (1.5, 3.0, 6.0, 9.0):
        grid = [a * t1 + (1 - a) * t2 for (t1, m1), (t2, m2) in itertools.combinations(points, 2)
                for a in (i / 200 for i in range(201)) if a * m1 + (1 - a) * m2 <= budget]
        assert least_time(points, budget) <= min(grid) + 1e-12


def test_greedy_sums_equal_brute_force_over_every_share() -> None:
    table = build_cost_table(model(6, vocab=256), small_cluster(0.1))  # memory binds: blocks must recompute
    cfg = ParallelConfig(tp=1, pp=3, dp=1, micro_batch=8, global_batch=64, seq_len=1024, engine="native")
    found = rank_model(table, cfg)
    assert found is not None
    n, ranks, points, _, _ = found
    slots = [key for key, count in ranks.items() for _ in range(count)]
    costs = [_rank_cost_fn(points[key], key[2]) for key in slots]
    sums = least_sums(table, cfg)
    assert sums is not None and len(sums) == n + 1
    fixed = sum(key[1] for key in slots)
    steps = [b - a for a, b in zip(sums, sums[1:])]
    assert steps[-1] > steps[0] * 1.05  # the last blocks cost more: memory forces recomputation
    for j in range(n + 1):
        brute = min(sum(c(k) for c, k in zip(costs, share)) for share in itertools.product(range(j + 1), repeat=len(slots))
                    if sum(share) == j)
        assert math.isclose(sums[j] - fixed, brute, rel_tol=1e-9) or sums[j] == brute == math.inf
