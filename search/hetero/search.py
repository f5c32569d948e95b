"""The heterogeneous search: plans for mixed GPU types, slow GPUs and lost nodes.

For every base option (TP degree, pipeline depth, micro-batch, ZeRO stage) it builds the pools of
TP units (``search.hetero.units``: TP inside one node of one group, one speed per pool), the replica
kinds (homogeneous, or two pools in contiguous runs: one cross-group hop per replica), and the mixes
of replicas per kind. Each mix is priced exactly: a kind's step time for m micro-batches is the
fastest over recompute modes and stage splits, each stage priced on its own group's hardware
(``search.hetero.price``: faster or larger-memory GPUs take more layers), and the micro-batches are
shared unevenly by the exact min-max allocation (``search.hetero.alloc``: replicas get micro-batches
in proportion to their speed). The k best plans are assembled and priced once more replica by
replica (``Pricing.estimate``, what ``estimate --plan`` repeats).

Optimal where provable: when every base option's mixes are enumerated (at most
``HeteroRequest.count_limit`` each) and every split is priced (``search.stages.SMALL_SPLITS``), the
result is the optimum of the space (``search.hetero.exhaustive`` checks it); otherwise mixes are
packed by rule and splits come from the stage DP's front, the status says ``feasible`` and the gap is
proven against a lower bound over the whole space (``search.hetero.gap``).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

from costmodel.hetero import HeteroCluster
from costmodel.specs import ModelSpec, ParallelConfig, TransformerLayer
from search.hetero.alloc import allocate
from search.hetero.bound import kind_line, mix_bound
from search.hetero.curve import KindCurve
from search.hetero.gap import relative_gap, space_bound
from search.hetero.price import PoolKey, Pricing, pool_keys
from search.hetero.types import (
    HeteroCandidate,
    HeteroRequest,
    HeteroResult,
    HeteroStats,
    ReplicaSpec,
)
from search.hetero.units import Mix, Pool, every_mix, kinds, mix_count, packings, pools
from search.stages import SMALL_SPLITS

SMALL_UNITS = 64
"""Most TP units whose mixes are all enumerated; larger clusters are packed by rule."""


@dataclass(frozen=True)
class _Found:
    """A priced mix, kept until the k best are assembled."""

    step_time_s: float
    base: ParallelConfig
    pool_list: tuple[Pool, ...]
    mix: Mix
    shares: tuple[tuple[int, ...], ...]
    """Micro-batches of each replica, per kind of the mix."""


def search_hetero(model: ModelSpec, cluster: HeteroCluster, req: HeteroRequest) -> HeteroResult:
    """The fastest heterogeneous plans that fit (see the module docstring)."""
    start = time.perf_counter()
    pricing = Pricing(model, cluster)
    queue, exact, options = _bounded_mixes(pricing, model, cluster, req)
    approximate = not exact
    found: list[tuple[float, int, _Found]] = []
    evaluated = 0
    for bound, order, base, pool_list, mix in queue:
        if len(found) == req.top_k and bound >= -found[0][0]:
            break  # every mix left is bounded above the k-th best: pruned, proven
        got = _price_mix(pricing, base, pool_keys(pool_list), mix, req, approximate)
        evaluated += 1
        if got is not None:
            _keep(found, _Found(got[0], base, tuple(pool_list), mix, got[1]), req.top_k, order)
    ranked = [f for _, _, f in sorted(found, key=lambda x: (-x[0], -x[1]))]
    candidates = tuple(_assemble(pricing, f, req.recomputes) for f in ranked)
    gap = 0.0 if exact else None if not candidates else relative_gap(candidates[0].step_time_s, space_bound(pricing, options))
    stats = HeteroStats(evaluated, len(queue) - evaluated, "optimal" if exact else "feasible", gap, time.perf_counter() - start)
    return HeteroResult(candidates[0] if candidates else None, candidates[1:], stats)


def _bounded_mixes(pricing: Pricing, model: ModelSpec, cluster: HeteroCluster, req: HeteroRequest) -> tuple[list, bool, list]:
    """Every mix to consider with its lower bound (``search.hetero.bound``), lowest first, whether
    the space was covered exactly (every mix enumerated, every split priced), and the base options
    with their pools (what ``search.hetero.gap`` bounds)."""
    fixed = min(g.cluster.efficiency.step_fixed_s for g in cluster.groups)
    queue, exact, options = [], True, []
    for base, pool_list, mixes, complete in bases(model, cluster, req):
        options.append((base, pool_list))
        proven = complete and _splits_exact(model, base.pp)
        exact = exact and proven
        keys = pool_keys(pool_list)
        total = req.global_batch // base.micro_batch
        lines: dict = {}
        for mix in mixes:
            for kind, _ in mix:
                if kind not in lines:
                    lines[kind] = kind_line(pricing, kind, keys, base, _bound_splits(pricing, kind, keys, base, proven))
            if sum(n for _, n in mix) <= total:
                queue.append((mix_bound(mix, lines, total, fixed), len(queue), base, pool_list, mix))
    queue.sort(key=lambda q: (q[0], q[1]))
    return queue, exact, options


def _bound_splits(pricing: Pricing, kind, keys, base: ParallelConfig, proven: bool) -> list:
    """Splits the bound ranges over: all the search prices when it is proving, else the balanced
    one only (a screening estimate: the status is ``feasible`` then)."""
    if not proven:
        return [None]
    return pricing.splits(kind, keys, frozenset(keys[e] for e in kind), base.model_copy(update={"global_batch": base.micro_batch * base.pp}))


def bases(model: ModelSpec, cluster: HeteroCluster, req: HeteroRequest) -> Iterator[tuple[ParallelConfig, list[Pool], list[Mix], bool]]:
    """(base option, pools, mixes to price, whether the mixes are all of them) per option."""
    blocks = sum(isinstance(layer, TransformerLayer) for layer in model.layers)
    gpn = max(g.cluster.gpus_per_node for g in cluster.groups)
    tps = req.tps or tuple(t for t in (1, 2, 4, 8, 16) if t <= gpn)
    pps = req.pps or tuple(range(1, req.max_pp + 1))
    mbs = tuple(b for b in req.micro_batches or (1, 2, 4, 8) if req.global_batch % b == 0)  # shares are whole micro-batches
    for tp in tps:
        pool_list = pools(cluster, tp)
        avail = [len(p.units) for p in pool_list]
        if not pool_list:
            continue
        for pp in (p for p in pps if p <= max(1, blocks) and p <= sum(avail)):
            kind_list = kinds(len(pool_list), pp)
            complete = _few_mixes(avail, kind_list, pp, req.count_limit)
            mixes = list(every_mix(avail, kind_list)) if complete else packings(avail, pp)
            for mb in mbs:
                for zero in req.zeros:
                    base = ParallelConfig(tp=tp, pp=pp, dp=1, micro_batch=mb, global_batch=req.global_batch,
                                          seq_len=req.seq_len, zero=zero, sp=tp > 1)
                    yield base, pool_list, mixes, complete


def _few_mixes(avail: list[int], kind_list: list, pp: int, limit: int) -> bool:
    """Whether to enumerate every mix: at most ``SMALL_UNITS`` units and ``limit`` mixes (the
    homogeneous ones alone are a quick lower count)."""
    if sum(avail) > SMALL_UNITS or math.prod(a // pp + 1 for a in avail) > limit:
        return False
    return mix_count(avail, kind_list, limit + 1) <= limit


def _splits_exact(model: ModelSpec, pp: int) -> bool:
    """Whether every stage split of ``pp`` stages is priced (``Pricing.splits``)."""
    return pp == 1 or math.comb(len(model.layers) - 1, pp - 1) <= SMALL_SPLITS


def _price_mix(pricing: Pricing, base: ParallelConfig, keys: list[PoolKey], mix: Mix,
               req: HeteroRequest, approximate: bool = False) -> tuple[float, tuple[tuple[int, ...], ...]] | None:
    """(step time, micro-batches per replica per kind) of the best allocation of ``mix``, or None."""
    replicas = sum(n for _, n in mix)
    total = req.global_batch // base.micro_batch
    used = frozenset(keys[e] for kind, _ in mix for e in kind)
    curves = [KindCurve(pricing, kind, keys, used, base, replicas, req.recomputes, not approximate) for kind, _ in mix]
    got = allocate(curves, [n for _, n in mix], total)
    if got is None:
        return None
    return got[0], tuple(tuple(row) for row in got[1])


def _keep(found: list, item: _Found, top_k: int, order: int) -> None:
    """Keep the ``top_k`` fastest: a max-heap on step time; ``order`` (the mix's place in the search)
    breaks ties, the earlier winning."""
    entry = (-item.step_time_s, -order, item)
    if len(found) < top_k:
        heapq.heappush(found, entry)
    elif entry[:2] > found[0][:2]:
        heapq.heapreplace(found, entry)


def _assemble(pricing: Pricing, f: _Found, modes: tuple[str, ...]) -> HeteroCandidate:
    """Devices for every replica (each stage takes its pool's next unit), the best split and
    recomputation for its share, then the plan priced replica by replica."""
    keys = pool_keys(f.pool_list)
    cursor = [0] * len(f.pool_list)
    used = frozenset(keys[e] for kind, _ in f.mix for e in kind)
    replicas = sum(n for _, n in f.mix)
    specs = []
    for (kind, _), row in zip(f.mix, f.shares):
        curve = KindCurve(pricing, kind, keys, used, f.base, replicas, modes)
        for m in row:
            devices = []
            for e in kind:
                devices.append(f.pool_list[e].units[cursor[e]])
                cursor[e] += 1
            _, cfg = curve.best(m)
            specs.append(ReplicaSpec(tuple(devices), cfg.stage_layers, m, cfg.recompute))
    return pricing.estimate(f.base, specs)

