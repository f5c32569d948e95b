"""A floor on the pipeline and the exposed gradient reduction together, from the first pipeline rank.

``costmodel.step._data_parallel_comm`` exposes, for each rank, its reduction and parameter gather
less the backward and forward they hide behind, less the rank's pipeline slack r·(forward +
backward)/v; the step pays the largest. Rank 0 has no slack, so the step pays at least its
E_0 ≥ red_0 + gather_0 − steps·bwd_0 − [ZeRO ≥ 1]·fwd_0 (max(a, b) ≥ b), with red_0 and gather_0 at
least the cheapest protocol's seconds per byte times rank 0's gradient and parameter bytes (as
``search.bounds`` term 5): a sum over rank 0's layers of c_g = α·params_g − steps·bwd_g − [ZeRO ≥ 1]·fwd_g,
with the forward and backward at their largest over the recomputation modes the layer may take.
Rank 0 holds k blocks (the most common layer group), the first layer (every split puts it there),
and perhaps other layers, which add at least min(0, c_g) each; the last layer is on rank pp − 1.

Fewer blocks on rank 0 lower E_0 but load the other pp − 1 ranks, whose slowest holds at least
their mean, M_k = max(M₀, ((n − k)·t_block + t_last)/(pp − 1)), with M₀ the floor of term 1. For
every k the step is at least (m − 1/d)·M + max(D(M), E_0(k)) at any M ≥ M_k, D being term 5 at M,
and that grows with M (``search.bounds`` term 5's slope condition), so it is at least its value at
M_k; the floor is the least of these over k = k₀..n. Under interleaving rank 0 runs vpp non-empty
chunks (0, pp, 2·pp, ...), so it holds at least k₀ = vpp − 1 − (other layers between the first
and the last) blocks beside the first layer. Each is at least (m − 1/d)·M₀ + D(M₀), terms 1
and 5 as before, so it never lowers the bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from costmodel.specs import ParallelConfig
from costmodel.engines import grad_bucket_params
from costmodel.step import _dp_coefficients, _terms, local_config
from costmodel.table import CostTable


def first_rank_floor_s(table: CostTable, cfg: ParallelConfig, view: object, group_times: tuple[float, ...], slowest: float,
                       d: float, dp_at: Callable[[float], float], others: list[float] | None = None) -> float:
    """min over k of (m − 1/d)·M_k + max(D(M_k), E_0(k)) (module docstring); ``dp_at(M)`` is D(M),
    ``group_times`` the fastest per-micro-batch time of one layer of each group; ``others[j]``, when
    given, the least summed time of ranks 1..pp − 1 holding j blocks (``search.rank_sum.least_sums``:
    memory may force them to recompute), which M_k is at least the mean of."""
    pipelined = cfg.num_microbatches - 1.0 / d
    bucket = bucket_floor_s(table, cfg, view)
    plain = pipelined * slowest + max(dp_at(slowest), bucket)
    keeps = _terms(table, cfg).fsdp_keeps_gathered  # FSDP2 under PP gathers and reduces once per step, as ZeRO 1
    if cfg.pp == 1 or (cfg.zero == 3 and not keeps) or cfg.dp * cfg.cp == 1:
        return plain
    groups = [int(g) for g in table.layer_group]
    counts = [groups.count(g) for g in range(len(table.groups))]
    main = max(range(len(counts)), key=lambda g: (counts[g], -g))
    n, last = counts[main], len(groups) - 1
    cost = _contributions(table, cfg, view)
    fixed = cost[groups[0]] if groups[0] != main else 0.0
    fixed += sum(min(0.0, cost[g]) for i, g in enumerate(groups) if g != main and 0 < i < last)
    t_last = group_times[groups[last]] if groups[last] != main else 0.0
    # rank 0 runs chunks 0, pp, 2·pp, ...: vpp non-empty chunks, so besides the first layer it holds at
    # least vpp − 1 layers, all blocks but for the other layers that may sit between the first and last
    between = sum(1 for i, g in enumerate(groups) if g != main and 0 < i < last)
    fewest = min(n, max(0, cfg.vpp - 1 - between))
    best = math.inf
    for k in range(fewest, n + 1):
        limit = max(slowest, ((n - k) * group_times[main] + t_last) / (cfg.pp - 1))
        if others is not None:
            limit = max(limit, others[n - k] / (cfg.pp - 1))
        best = min(best, pipelined * limit + max(dp_at(limit), k * cost[main] + fixed, bucket))
    return best


def bucket_floor_s(table: CostTable, cfg: ParallelConfig, view: object) -> float:
    """A floor on the first rank's exposed reduction and gather whatever its layers: the last
    gradient bucket and the first parameter bucket are never hidden (``costmodel.step.
    _data_parallel_comm``: max(one bucket, all − backward), and without overlap all of it), and rank 0
    has no pipeline slack. Its buckets hold P/⌈P/B⌉ ≥ x = min(P₀, B/2) parameters, P ≥ P₀ those of
    the first layer, B the engine's bucket (``grad_bucket_params``); split between dense and expert
    parameters a and b with a + b ≥ x, one bucket costs at least min(f_dense(x), f_expert(x)) (each
    cost concave, non-decreasing and 0 at 0, so f(a) ≥ (a/x)·f(x) for a ≤ x; the expert part only
    where the model has experts)."""
    keeps = _terms(table, cfg).fsdp_keeps_gathered
    if (cfg.zero == 3 and not keeps) or cfg.dp * cfg.cp == 1:
        return 0.0
    first = table.cost(int(table.layer_group[0]), view)  # type: ignore[arg-type]
    x = min(first.params, grad_bucket_params(cfg) / 2)
    has_experts = any(table.cost(g, view).expert_params > 0 for g in range(len(table.groups)))  # type: ignore[arg-type]
    (dense_red, expert_red), (dense_ag, expert_ag) = _dp_coefficients(table, cfg)

    def one(dense: object, expert: object, nbytes: float) -> float:
        d = dense(x * nbytes)  # type: ignore[operator]
        return min(d, expert(x * nbytes)) if has_experts else d  # type: ignore[operator]

    return one(dense_red, expert_red, cfg.grad_reduce_bytes) + (one(dense_ag, expert_ag, cfg.param_bytes) if cfg.zero else 0.0)


def first_rank_terms(table: CostTable, cfg: ParallelConfig, view: object) -> tuple[float, float] | None:
    """(c of one block, what the first rank's other layers add at least) of the module docstring's
    E_0 = k·c + that, for a first rank holding k blocks; None where no reduction is exposed this way
    (one pipeline rank, ZeRO-3 per layer, no data parallelism)."""
    keeps = _terms(table, cfg).fsdp_keeps_gathered
    if cfg.pp == 1 or (cfg.zero == 3 and not keeps) or cfg.dp * cfg.cp == 1:
        return None
    groups = [int(g) for g in table.layer_group]
    counts = [groups.count(g) for g in range(len(table.groups))]
    main = max(range(len(counts)), key=lambda g: (counts[g], -g))
    last = len(groups) - 1
    cost = _contributions(table, cfg, view)
    fixed = cost[groups[0]] if groups[0] != main else 0.0
    fixed += sum(min(0.0, cost[g]) for i, g in enumerate(groups) if g != main and 0 < i < last)
    return cost[main], fixed


def _contributions(table: CostTable, cfg: ParallelConfig, view: object) -> list[float]:
    """c_g of one layer of each group (module docstring)."""
    (dense_red, expert_red), (dense_ag, expert_ag) = _dp_coefficients(table, cfg)
    steps = 1 if cfg.zero < 2 or _terms(table, cfg).fsdp_keeps_gathered else cfg.num_microbatches
    alpha_dense = steps * cfg.grad_reduce_bytes * _slope(dense_red) + (cfg.param_bytes * _slope(dense_ag) if cfg.zero else 0.0)
    alpha_expert = steps * cfg.grad_reduce_bytes * _slope(expert_red) + (cfg.param_bytes * _slope(expert_ag) if cfg.zero else 0.0)
    views = [view] + [local_config(table, cfg, mode) for mode in ("selective", "full")]
    out = []
    for g in range(len(table.groups)):
        c = table.cost(g, view)  # type: ignore[arg-type]
        # what hides the collectives, at its largest over the recomputation modes a layer may take
        hidden = max(steps * x.bwd_s + (x.fwd_s if cfg.zero else 0.0) for x in (table.cost(g, v) for v in views))  # type: ignore[arg-type]
        out.append(alpha_dense * (c.params - c.expert_params) + alpha_expert * c.expert_params - hidden)
    return out


def _slope(cost: object) -> float:
    """The least seconds per byte of a collective's protocols (0 for a group of one)."""
    return min((per_byte for _, per_byte in cost.terms), default=0.0)  # type: ignore[attr-defined]
