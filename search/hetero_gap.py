"""A lower bound on every heterogeneous plan of the search space, for a proven optimality gap.

When the GPUs are many the search packs them by rule (``search.hetero_units.packings``) and prices
only some splits, so its best plan is not proven optimal. This bound holds for every plan of the
whole space the search draws from: every base option (TP, pipeline depth, micro-batch, ZeRO), every
mix of replicas, every stage split, every share of the micro-batches and every recompute mode. The
recorded gap (best − bound) / bound is then a true upper limit on how far the best plan can be from
the optimum of that space.

The argument (a continuous relaxation: every TP unit of every pool may take any layers, for any
micro-batch). Fix a base option; M = global batch / micro-batch is the number of micro-batches the
replicas share (``search.hetero_alloc``: Σ_r m_r = M). Replica r runs m_r micro-batches through its
stages s, each stage on one TP unit of pool e(s), and no unit holds two stages. With X_{r,s} the
stage's time per micro-batch, the replica's step is at least m_r·max_s X_{r,s} plus the cluster's
smallest fixed step time F (the pipeline m·max + Σ − max, ``costmodel.pipeline``, and the terms
outside it, ``search.hetero_bound``), so T − F ≥ m_r·X_{r,s} for every stage. A stage's time is at
least the sum over its layers l of t_e(l), the layer's time on its pool's own hardware with no
recomputation (``Pricing.layer_times``; the bound of ``search.hetero_bound`` rests on the same
fact). Take any weights y_e ≥ 0 with Σ_e U_e·y_e = 1, U_e the units of pool e. Weighting each
stage's inequality by y_{e(s)} and summing over all stages of all replicas (at most U_e of them on
pool e):

    T − F ≥ Σ_{r,s} y_{e(s)} m_r X_{r,s} ≥ Σ_r m_r Σ_l min_e y_e t_e(l) = M · Σ_l min_e y_e t_e(l),

because every replica passes every layer once per micro-batch (weak LP duality of the fractional
assignment of layer work to pools). Any y gives a valid bound; :func:`base_bound` takes the best of
two: weights proportional to each unit's whole-model throughput (tight when every layer runs the
same factor faster on one pool than on another) and equal weights. The bound over the space is the
least over base options.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from costmodel.specs import ParallelConfig
from search.hetero_price import Pricing, pool_keys
from search.hetero_units import Pool


def base_bound(pricing: Pricing, base: ParallelConfig, pool_list: Sequence[Pool], fixed_s: float) -> float:
    """The module's bound for one base option on ``pool_list`` (the step time no plan of it beats)."""
    cfg = base.model_copy(update={"dp": 1, "global_batch": base.micro_batch * base.pp, "recompute": "none"})
    keys = pool_keys(pool_list)
    units = np.array([len(p.units) for p in pool_list], dtype=float)
    times = np.stack([pricing.layer_times(k, cfg) for k in keys])  # pools x layers
    total = base.global_batch // base.micro_batch
    best = 0.0
    for weights in _weight_choices(times, units):
        best = max(best, total * float(np.min(weights[:, None] * times, axis=0).sum()))
    return best + fixed_s


def space_bound(pricing: Pricing, options: Iterable[tuple[ParallelConfig, Sequence[Pool]]]) -> float:
    """The least :func:`base_bound` over the base options searched (``inf`` when there are none)."""
    fixed = min(g.cluster.efficiency.step_fixed_s for g in pricing.cluster.groups)
    seen: dict[tuple, float] = {}
    for base, pool_list in options:
        key = (base.tp, base.pp > 1, base.micro_batch, base.zero)
        if key not in seen:
            seen[key] = base_bound(pricing, base, pool_list, fixed)
    return min(seen.values(), default=float("inf"))


def relative_gap(best_s: float, bound_s: float) -> float:
    """(best − bound) / bound, never below 0 (rounding can put a tight bound a hair above)."""
    return max(0.0, (best_s - bound_s) / bound_s) if bound_s > 0 else 0.0


def _weight_choices(times: np.ndarray, units: np.ndarray) -> list[np.ndarray]:
    """Weights y ≥ 0 with Σ_e U_e y_e = 1 (each a valid dual point; see the module docstring)."""
    raw = [1.0 / times.sum(axis=1), np.ones(len(units))]
    return [w / float((units * w).sum()) for w in raw if np.all(np.isfinite(w)) and float((units * w).sum()) > 0]
