"""A lower bound on every heterogeneous plan of the search space, for a proven optimality gap.

When the GPUs are many the search packs them by rule (``search.hetero.units.packings``) and prices
only some splits, so its best plan is not proven optimal. This bound holds for every plan of the
whole space the search draws from: every base option (TP, pipeline depth, micro-batch, ZeRO), every
mix of replicas, every stage split, every share of the micro-batches and every recompute mode. The
recorded gap (best − bound) / bound is then a true upper limit on how far the best plan can be from
the optimum of that space.

The argument (a continuous relaxation: every TP unit of every pool may take any layers, for any
micro-batch). Fix a base option (pipeline depth p); M = global batch / micro-batch is the number of
micro-batches the replicas share (``search.hetero.alloc``: Σ_r m_r = M, each m_r ≥ 1). Replica r
runs m_r micro-batches through its p stages, each stage on one TP unit of pool e(s), no unit holding
two stages, so R replicas use R·p ≤ U units (U_e units in pool e, U in all). With X_{r,s} the
stage's time per micro-batch and W_r = Σ_s X_{r,s}, the replica's step is at least
m_r·max_s X_{r,s} + W_r − max_s X_{r,s} (1F1B and GPipe, ``costmodel.pipeline``) plus the cluster's
smallest fixed step time F (``search.hetero.bound``); as (m − 1)(max X − X_s) ≥ 0, for every stage

    T − F ≥ (m_r − 1)·X_{r,s} + W_r.

A stage's time is at least the sum over its layers l of t_e(l), the layer's time on its pool's own
hardware with no recomputation (``Pricing.layer_times``; ``search.hetero.bound`` rests on the same
fact). Take weights y_e ≥ 0 with Σ_e U_e·y_e = 1, and let c = Σ_l min_e y_e t_e(l) and
w = Σ_l min_e t_e(l). Weighting each stage's inequality by y_{e(s)} and summing over the R·p stages
in use (their weights sum to S ≤ min(1, R·p·max_e y_e)): every replica passes every layer once per
micro-batch, so Σ_s y_{e(s)} X_{r,s} ≥ c, W_r ≥ w and Σ_s y_{e(s)} ≥ p·min_e y_e, giving

    (T − F)·S ≥ (M − R)·c + R·p·min_e y_e·w,

and, without the fill term, T − F ≥ M·c (the same sum with (m_r − 1)X + W ≥ m_r X, S ≤ 1). The
bound of a base option is F plus the larger of M·c and the least over R in 1..min(M, ⌊U/p⌋) of
((M − R)·c + R·p·min y·w) / min(1, R·p·max y) (weak LP duality of the fractional assignment of
layer work to pools; any y is valid). :func:`base_bound` takes the best over two weightings:
proportional to each unit's whole-model throughput (tight when every layer runs the same factor
faster on one pool than another) and equal. The bound over the space is the least over base options.

Options whose weights cannot fit hold no plan and are left out (:func:`weights_overflow`): under
ZeRO ≤ 2 every data-parallel rank keeps its stage's parameters whole at ``param_bytes`` each (ZeRO's
definition, Rajbhandari et al. SC20, sec. 5; ``costmodel.rank_memory._state_bytes`` shards them
only under ZeRO-3); some stage holds at least 1/p of the parameters and some GPU of its tp at least
1/tp of those, so a GPU needs ≥ param_bytes·P/(p·tp) bytes (P leaves out the head, whose weight may
be the embedding's), which no plan fits when it exceeds the largest GPU memory of the pools.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from costmodel.params import layer_params
from costmodel.specs import HeadLayer, ModelSpec, ParallelConfig
from search.hetero.price import Pricing, pool_keys
from search.hetero.units import Pool


def base_bound(pricing: Pricing, base: ParallelConfig, pool_list: Sequence[Pool], fixed_s: float) -> float:
    """The module's bound for one base option on ``pool_list`` (the step time no plan of it beats)."""
    if weights_overflow(pricing.model, base, [pricing.cluster.groups[p.group].cluster.gpu.hbm_gib for p in pool_list]):
        return float("inf")
    cfg = base.model_copy(update={"dp": 1, "global_batch": base.micro_batch * base.pp, "recompute": "none"})
    keys = pool_keys(pool_list)
    units = np.array([len(p.units) for p in pool_list], dtype=float)
    times = np.stack([pricing.layer_times(k, cfg) for k in keys])  # pools x layers
    total, stages = base.global_batch // base.micro_batch, base.pp
    most = min(total, int(units.sum()) // stages)
    if most < 1:
        return float("inf")  # no replica fits on the units: the option holds no plan
    replicas = np.arange(1, most + 1, dtype=float)
    whole = float(times.min(axis=0).sum())
    best = 0.0
    for y in _weight_choices(times, units):
        c = float(np.min(y[:, None] * times, axis=0).sum())
        filled = ((total - replicas) * c + replicas * stages * y.min() * whole) / np.minimum(1.0, replicas * stages * y.max())
        best = max(best, total * c, float(filled.min()))
    return best + fixed_s


def weights_overflow(model: ModelSpec, base: ParallelConfig, hbm_gib: Sequence[float]) -> bool:
    """Whether the weights alone overflow every GPU of the option (see the module docstring; ZeRO-3
    shards them, so it is never sure then)."""
    if base.zero >= 3 or not hbm_gib:
        return False
    params = sum(layer_params(layer) for layer in model.layers if not isinstance(layer, HeadLayer))
    return base.param_bytes * params / (base.pp * base.tp) > max(hbm_gib) * 2**30


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
