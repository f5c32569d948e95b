"""Uneven data-parallel shares: split M micro-batches over replicas to minimise the slowest replica.

Each replica kind k has a step time T_k(m) that does not decrease with its micro-batches m (more
micro-batches never take less time; memory only grows with m). The step is max_r T_{k(r)}(m_r) with
Σ m_r = M and every m_r ≥ 1. For non-decreasing T_k the optimum is found exactly by a threshold:
the smallest T whose capacity Σ_k n_k · max{m : T_k(m) ≤ T} reaches M (any allocation of step T
gives every replica at most that many; conversely the capacity at T can be trimmed to M without
raising any replica's time). The threshold is one of the values T_k(m); it is found by bisection
on T, each capacity by bisection on m (the classic min-max resource allocation, Ibaraki & Katoh,
"Resource Allocation Problems", MIT Press 1988, ch. 4).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence

TimeFn = Callable[[int], float]
"""T_k(m): step time of one replica of a kind running m micro-batches; ``math.inf`` when it does not fit."""
REL_TOL = 1e-12
"""Bisection stops when the bracket is this narrow, relative: below any difference the cost model's
floating-point arithmetic could separate."""


def allocate(times: Sequence[TimeFn], counts: Sequence[int], total: int) -> tuple[float, list[list[int]]] | None:
    """(step time, micro-batches of each replica of each kind) minimising the slowest replica, or
    None when the replicas cannot share ``total`` micro-batches (fewer than one each, or none fits)."""
    replicas = sum(counts)
    if replicas == 0 or total < replicas:
        return None
    most = total - replicas + 1
    lo = max(t(1) for t in times)
    if math.isinf(lo):
        return None
    if _capacity(times, counts, lo, most) < total:
        hi = max(_largest_finite(t, most) for t in times)
        if _capacity(times, counts, hi, most) < total:
            return None
        while hi - lo > REL_TOL * hi:
            mid = 0.5 * (lo + hi)
            if _capacity(times, counts, mid, most) >= total:
                hi = mid
            else:
                lo = mid
        lo = hi
    shares = [[_most_within(t, lo, most)] * n for t, n in zip(times, counts)]
    _trim(times, shares, total)
    step = max(times[k](m) for k, row in enumerate(shares) for m in row)
    return step, shares


def _capacity(times: Sequence[TimeFn], counts: Sequence[int], limit: float, most: int) -> int:
    """Micro-batches the replicas can run within ``limit`` (0 from a kind that cannot run one)."""
    return sum(n * _most_within(t, limit, most) for t, n in zip(times, counts))


def _most_within(t: TimeFn, limit: float, most: int) -> int:
    """Largest m in [1, most] with t(m) <= limit (0 when even one micro-batch is slower)."""
    if t(1) > limit:
        return 0
    lo, hi = 1, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if t(mid) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _largest_finite(t: TimeFn, most: int) -> float:
    """t at the largest m in [1, most] whose time is finite (memory can run out as in-flight work
    grows; the finite m are a prefix since t does not decrease)."""
    lo, hi = 1, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if math.isinf(t(mid)):
            hi = mid - 1
        else:
            lo = mid
    return t(lo)


def _trim(times: Sequence[TimeFn], shares: list[list[int]], total: int) -> None:
    """Take surplus micro-batches one at a time from the replica with the most time (never raises
    the max; keeps equal replicas within one micro-batch of each other)."""
    surplus = sum(map(sum, shares)) - total
    heap = [(-times[k](m), k, i) for k, row in enumerate(shares) for i, m in enumerate(row) if m > 1]
    heapq.heapify(heap)
    while surplus > 0:
        _, k, i = heapq.heappop(heap)
        shares[k][i] -= 1
        surplus -= 1
        if shares[k][i] > 1:
            heapq.heappush(heap, (-times[k](shares[k][i]), k, i))
