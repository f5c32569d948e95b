"""A lower bound on a replica mix's step time, so that the search prices only mixes that can win.

A replica's step is its pipeline (m·max_s X_s + Σ_s X_s − max_s X_s for 1F1B and GPipe,
``costmodel.pipeline``) plus terms that are never below the step's fixed time
(``EfficiencySpec.step_fixed_s``). With no recomputation (the fastest mode) and the smallest
slowest-stage time b and fill-and-drain a over the kind's splits, T_k(m) ≥ a_k + b_k·m + fixed,
whatever the replica count and memory. Sharing M micro-batches over n_k replicas of each kind, at
least one each, the best continuous share meets Σ n_k (T − a_k)/b_k = M, so

    T ≥ max( max_k (a_k + b_k), (M + Σ n_k a_k / b_k) / Σ n_k / b_k ) + fixed,

a bound that the integer allocation and the real prices can only exceed. Stage times are priced on
each pool's own hardware: the per-layer terms read no network for ZeRO ≤ 2 (``costmodel.local``),
and for ZeRO-3 the own network is the fastest a job could see, so the bound stays below the price.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from costmodel.specs import ParallelConfig
from search.hetero.price import PoolKey, Pricing
from search.hetero.units import Kind, Mix

Line = tuple[float, float]
"""(a, b): fill-and-drain and slowest-stage time per micro-batch."""


def kind_line(pricing: Pricing, kind: Kind, keys: Sequence[PoolKey], base: ParallelConfig,
              splits: Sequence[tuple[int, ...] | None]) -> Line:
    """(a, b) of ``kind`` over ``splits`` (each its own minimum, so the line is below every split's);
    a stage's time is the sum of its layers' times on its pool (``Pricing.layer_times``)."""
    cfg = base.model_copy(update={"dp": 1, "global_batch": base.micro_batch * base.pp, "recompute": "none"})
    prefix = {e: np.concatenate([[0.0], np.cumsum(pricing.layer_times(keys[e], cfg))]) for e in set(kind)}
    a = b = float("inf")
    for sizes in splits:
        bounds = np.concatenate([[0], np.cumsum(sizes if sizes else pricing.table(keys[kind[0]], frozenset()).default_split(base.pp))])
        times = [float(prefix[e][bounds[s + 1]] - prefix[e][bounds[s]]) for s, e in enumerate(kind)]
        a, b = min(a, sum(times) - max(times)), min(b, max(times))
    return a, b


def mix_bound(mix: Mix, lines: dict[Kind, Line], total: int, fixed_s: float) -> float:
    """The module's bound for sharing ``total`` micro-batches over ``mix``."""
    floor = max(lines[kind][0] + lines[kind][1] for kind, _ in mix)
    rate = sum(n / lines[kind][1] for kind, n in mix)
    offset = sum(n * lines[kind][0] / lines[kind][1] for kind, n in mix)
    return max(floor, (total + offset) / rate) + fixed_s
