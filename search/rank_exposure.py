"""A floor on the pipeline and the exposed gradient reduction together, from every pipeline rank.

``search.exposure`` bounds the step from the first rank, which has no pipeline slack. The ranks
after it have some, but not much: ``costmodel.step._data_parallel_comm`` pays the largest over rank
types of the exposed reduction and gather less the type's first rank's slack, so for every rank r

    E_r ≥ Σ over r's layers of c_g − r·(forward_r + backward_r)/v ≥ Σ c_g − r·M/v,

with c_g as in ``search.exposure`` (the cheapest protocol's seconds per byte times the layer's
gradient and parameter bytes, less the largest backward and forward it may hide behind) and M the
slowest rank's micro-batch time (``costmodel.pipeline``), which is at least any rank's forward and
backward (``costmodel.ranks.RankType.time_s`` adds only non-negative terms to them).

For a given M, a rank r holding k blocks of the most common group (time t each, their fastest)
needs k·t ≤ M (less the first layer's time on rank 0, the last layer's on rank pp − 1: every split
puts them there), and exposes at least T_r(k) = k·c + c_fixed + o_r(k) − r·M/v, where o_r(k) is the
most the other layers that fit beside the blocks (time ≤ M − k·t) can take off: a fractional
knapsack over their negative c_g, never less than the integer one. T_r grows with k when c > 0.
The n blocks must all be placed, so the largest E_r is at least E*(M), the n-th smallest of all the
ranks' thresholds T_r(1), T_r(2), ... (rank r can take k blocks under E only if T_r(k) ≤ E). The
step is then at least (m − 1/d)·M + max(D(M), E*(M), bucket), D being ``search.bounds`` term 5.

Between two multiples of t the caps do not change and E*(M) falls at most (pp − 1)/v per unit of M,
so where m − 1/d ≥ (pp − 1)/v (and term 5's slope condition, which is weaker) the whole is
non-decreasing in M there: its least over M ≥ M₀ is at M₀ or at a multiple j·t above it, where a
cap grows. The floor is the least over those points, each a valid floor of every split whose
slowest rank lies in its interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from costmodel.specs import ParallelConfig
from costmodel.step import _terms
from costmodel.table import CostTable
from search.exposure import _contributions

TOLERANCE = 1e-9
"""Relative slack on the caps k·t ≤ M, erring towards more blocks per rank (a lower floor)."""


def later_ranks_floor_s(table: CostTable, cfg: ParallelConfig, view: object, group_times: tuple[float, ...], slowest: float,
                        d: float, dp_at: Callable[[float], float], bucket: float) -> float:
    """min over M ≥ ``slowest`` of (m − 1/d)·M + max(D(M), E*(M), ``bucket``) (module docstring);
    0 where it does not apply (one pipeline rank, ZeRO-3 per layer, no data parallelism, blocks
    that hide their own reduction, or a schedule too short for the slope condition)."""
    keeps = _terms(table, cfg).fsdp_keeps_gathered
    pipelined = cfg.num_microbatches - 1.0 / d
    if cfg.pp == 1 or (cfg.zero == 3 and not keeps) or cfg.dp * cfg.cp == 1 or pipelined < (cfg.pp - 1) / cfg.vpp:
        return 0.0
    groups = [int(g) for g in table.layer_group]
    counts = [groups.count(g) for g in range(len(table.groups))]
    main = max(range(len(counts)), key=lambda g: (counts[g], -g))
    cost = _contributions(table, cfg, view)
    t, c, n = group_times[main], cost[main], counts[main]
    if c <= 0.0 or t <= 0.0:
        return 0.0
    last = len(groups) - 1
    ends = {0: groups[0], cfg.pp - 1: groups[last]}  # rank -> the layer every split puts on it
    items = [(group_times[g], cost[g]) for i, g in enumerate(groups) if g != main and 0 < i < last and cost[g] < 0.0]
    breaks = sorted({slowest} | {f + j * t for f in {0.0} | {group_times[g] for g in ends.values() if g != main}
                                  for j in range(n + 1) if f + j * t > slowest})
    best = math.inf
    for a, b in _pieces(breaks):
        if pipelined * a >= best:
            break
        exposed = _least_largest(a, b, t, c, n, cfg, ends, group_times, cost, main, items)
        best = min(best, pipelined * a + max(dp_at(a), exposed, bucket))
    return best


PIECES = 4
"""Parts each interval between two breakpoints is cut into (finer parts: a tighter floor)."""


def _pieces(breaks: list[float]) -> list[tuple[float, float]]:
    """[a, b) intervals covering M ≥ the first breakpoint: each between two breakpoints cut into
    :data:`PIECES`, then [last, ∞)."""
    out = [(lo + (hi - lo) * i / PIECES, lo + (hi - lo) * (i + 1) / PIECES) for lo, hi in zip(breaks, breaks[1:]) for i in range(PIECES)]
    return out + [(breaks[-1], math.inf)]


def _least_largest(a: float, b: float, t: float, c: float, n: int, cfg: ParallelConfig, ends: dict[int, int],
                   group_times: tuple[float, ...], cost: list[float], main: int, items: list[tuple[float, float]]) -> float:
    """A floor on E*(M) for every M in [a, b): the n-th smallest threshold T_r(k) over ranks r and
    k ≥ 1, each with the caps at M = a (no breakpoint lies inside the interval) and the slack and the
    room of the other layers at M = b, their largest (0 where b is unbounded; inf when the caps hold
    fewer than n blocks)."""
    if b == math.inf:
        return 0.0
    thresholds: list[float] = []
    for r in range(cfg.pp):
        fixed_t = fixed_c = 0.0
        if r in ends and ends[r] != main:
            fixed_t, fixed_c = group_times[ends[r]], cost[ends[r]]
        slack = r * b / cfg.vpp
        cap = math.floor((a - fixed_t) / t * (1 + TOLERANCE)) if a >= fixed_t else 0
        for k in range(1, min(cap, n) + 1):
            room = b - fixed_t - k * t
            thresholds.append(k * c + fixed_c + _most_taken(items, room) - slack)
    if len(thresholds) < n:
        return math.inf
    thresholds.sort()
    return max(0.0, thresholds[n - 1])


def _most_taken(items: list[tuple[float, float]], room: float) -> float:
    """The least sum of the negative contributions of ``items`` (time, c) fitting in ``room`` seconds,
    fractions allowed (so never above any whole choice's)."""
    total, left = 0.0, max(0.0, room) * (1 + TOLERANCE)
    for time_s, gain in sorted(items, key=lambda x: x[1] / x[0] if x[0] > 0 else -math.inf):
        if time_s <= 0.0:
            total += gain
            continue
        share = min(1.0, left / time_s)
        total += share * gain
        left -= share * time_s
        if left <= 0.0:
            break
    return total
