"""A floor on the sum of the pipeline ranks' micro-batch times when memory forces recomputation.

The pipeline's fill and drain is (S − M)/d, S the ranks' summed micro-batch time (``search.bounds``
term 1). ``search.bounds`` takes S at least the layers' fastest times; when the activations do not
fit, blocks must be recomputed on every rank that cannot hold its share, and S grows. With the ranks
of ``search.pressure`` (each rank r may hold blocks whose bytes per block m(q) = P + 1.05·f_r·a(q) in
a mix q of modes sum to at most μ_r), a rank holding k blocks spends at least k·τ_r(μ_r/k), τ_r(b) the
least time per block over the mixes whose bytes per block are at most b (a linear program over the
simplex: a mode, or two modes mixed to spend b exactly). k·τ_r(μ_r/k) is the perspective of the
convex, non-increasing τ_r, so convex in k, and the least sum over ranks with Σ_r k_r = n is found
by giving blocks one at a time to the rank whose time grows least (separable convex allocation,
greedy is optimal). Blocks are whole but their mixes real: a relaxation, so a floor. The other
layers keep their fastest times, already in S.
"""

from __future__ import annotations

import bisect
import heapq
import math

from costmodel.specs import ParallelConfig
from costmodel.table import CostTable
from search.pressure import rank_model


def rank_sum_extra_s(table: CostTable, cfg: ParallelConfig, block_s: float, memo: dict | None = None, mode: str | None = None) -> float:
    """How much the n blocks' summed time must exceed n·``block_s`` (the blocks' time in the caller's
    S) for every rank to fit (module docstring); 0 when memory does not bind, ``inf`` when the blocks
    cannot fit at all."""
    sums = least_sums(table, cfg, memo, mode)
    return math.inf if sums is None else max(0.0, sums[-1] - sums[0] - (len(sums) - 1) * block_s)


def least_sums(table: CostTable, cfg: ParallelConfig, memo: dict | None = None, mode: str | None = None,
               without_first: bool = False) -> list[float] | None:
    """For j = 0..n, the least summed time of the ranks (all, or all but rank 0) holding j blocks
    between them, with their pinned layers (``search.pressure``); ``inf`` where j blocks cannot fit,
    None where the pinned layers alone cannot. The greedy order is optimal for every j at once."""
    model = rank_model(table, cfg, memo, mode)
    if model is None:
        return None
    n, ranks, points, _, first = model
    slots = [key for key, count in ranks.items() for _ in range(count)]
    if without_first:
        slots.remove(first)
    held = [0] * len(slots)
    cost = {key: _rank_cost_fn(points[key], key[2]) for key in set(slots)}
    heap = [(cost[key](1) - cost[key](0), i) for i, key in enumerate(slots)]
    heapq.heapify(heap)
    sums = [sum(key[1] for key in slots)]
    for _ in range(n):
        step, i = heapq.heappop(heap) if heap else (math.inf, -1)
        sums.append(sums[-1] + step)
        if step == math.inf:
            continue
        held[i] += 1
        key = slots[i]
        heapq.heappush(heap, (cost[key](held[i] + 1) - cost[key](held[i]), i))
    return sums


def _rank_cost_fn(points: list[tuple[float, float]], room: float):  # type: ignore[no-untyped-def]
    """k -> k·τ(room / k): the least time of k blocks on a rank with ``room`` bytes."""
    def cost(k: int) -> float:
        if k == 0:
            return 0.0
        return k * least_time(points, room / k)
    return cost


def least_time(points: list[tuple[float, float]], budget: float) -> float:
    """τ(budget): the least time per block over the mixes of ``points`` (time, bytes) whose bytes per
    block are at most ``budget``; ``inf`` when none is."""
    best = min((t for t, m in points if m <= budget), default=math.inf)
    for (t1, m1), (t2, m2) in ((a, b) for a in points for b in points if a[1] < b[1]):
        if m1 <= budget < m2:
            best = min(best, t1 + (t2 - t1) * (budget - m1) / (m2 - m1))
    return best


JOINT_STEPS = 16
"""Grid steps of :func:`joint_floor_s` between the slowest rank's floor and 1.5 times it."""


def joint_floor_s(table: CostTable, cfg: ParallelConfig, slowest: float, others_s: float, d: float,
                  memo: dict | None = None, mode: str | None = None, first: tuple[float, float] | None = None,
                  bucket_s: float = 0.0) -> float:
    """A floor on the pipelined part (m − 1/d)·M + S/d with M and S of one split together: for a
    slowest rank of at most M, every rank holds its blocks within time M (and memory), so S is at
    least ``others_s`` (the other layers) plus the least blocks' sum under that cap, Σ(M), which
    does not grow with M. On a grid g_0 = ``slowest`` < g_1 < ... the part is at least
    (m − 1/d)·g_i + (others_s + Σ(g_{i+1}))/d for M in [g_i, g_{i+1}], and beyond the grid at least
    its value with the uncapped Σ; the floor is the least of these. ``first`` = (c, e) adds the first
    rank's exposed gradient reduction, at least k·c + e for a first rank of k blocks
    (``search.exposure.first_rank_terms``, c > 0): within M the other ranks hold at most their caps,
    so the first holds at least the rest; and at least ``bucket_s`` (``search.exposure.bucket_floor_s``)."""
    model = rank_model(table, cfg, memo, mode)
    if model is None or slowest == math.inf:
        return math.inf
    n, ranks, points, _, first_key = model
    costs = {key: _memo_cost(_rank_cost_fn(points[key], key[2]), n) for key in ranks}
    pipelined = cfg.num_microbatches - 1.0 / d
    grid = [slowest * (1 + 0.5 * i / JOINT_STEPS) for i in range(JOINT_STEPS + 1)] + [math.inf]

    def exposed(limit: float) -> float:
        if first is None or first[0] <= 0:
            return bucket_s
        caps = _caps(costs, limit)
        others_hold = sum(caps[key] * count for key, count in ranks.items()) - caps[first_key]
        return max(bucket_s, max(0, n - others_hold) * first[0] + first[1])

    sums = [_capped_sum(ranks, costs, n, g) for g in grid]
    best = pipelined * grid[-2] + (others_s + sums[-1]) / d + exposed(math.inf)
    for i in range(JOINT_STEPS):
        best = min(best, pipelined * grid[i] + (others_s + sums[i + 1]) / d + exposed(grid[i + 1]))
    return best


def _caps(costs: dict, limit: float) -> dict:
    """The most blocks each rank key holds within ``limit`` (its cost grows with the blocks)."""
    return {key: max(0, bisect.bisect_right(c, limit - key[1]) - 1) for key, c in costs.items()}


def _memo_cost(cost, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    """cost(k) for k = 0..n."""
    return [cost(k) for k in range(n + 1)]


def _capped_sum(ranks: dict, costs: dict, n: int, limit: float) -> float:
    """The least summed block time of n blocks with every rank's time (pinned layers included) at
    most ``limit``: the greedy of :func:`least_sums` with each rank capped."""
    caps = _caps(costs, limit)
    slots = [key for key, count in ranks.items() for _ in range(count)]
    if sum(caps[key] for key in slots) < n:
        return math.inf
    held = [0] * len(slots)
    heap = [(costs[key][1] - costs[key][0], i) for i, key in enumerate(slots) if caps[key] > 0]
    heapq.heapify(heap)
    total = 0.0
    for _ in range(n):
        step, i = heapq.heappop(heap)
        total += step
        held[i] += 1
        key = slots[i]
        if held[i] < caps[key]:
            heapq.heappush(heap, (costs[key][held[i] + 1] - costs[key][held[i]], i))
    return total
