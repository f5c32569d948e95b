"""The heterogeneous search: plans for mixed GPU types, slow GPUs and lost nodes.

For every base option (TP degree, pipeline depth, micro-batch, ZeRO stage) it builds the pools of
TP units (``search.hetero_units``: TP inside one node of one group, one speed per pool), the replica
kinds (homogeneous, or two pools in contiguous runs: one cross-group hop per replica), and the mixes
of replicas per kind. Each mix is priced exactly: a kind's step time for m micro-batches is the
fastest over recompute modes and stage splits, each stage priced on its own group's hardware
(``search.hetero_price``: faster or larger-memory GPUs take more layers), and the micro-batches are
shared unevenly by the exact min-max allocation (``search.hetero_alloc``: replicas get micro-batches
in proportion to their speed). The k best plans are assembled and priced once more replica by
replica (``Pricing.estimate``, what ``estimate --plan`` repeats).

Optimal where provable: when every base option's mixes are enumerated (at most
``HeteroRequest.count_limit`` each) and every split is priced (``search.stages.SMALL_SPLITS``), the
result is the optimum of the space (``search.hetero_exhaustive`` checks it); otherwise mixes are
packed by rule and splits come from the stage DP's front, and the status says ``feasible``.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

from costmodel.hetero import HeteroCluster
from costmodel.specs import ModelSpec, ParallelConfig, TransformerLayer
from search.hetero_alloc import allocate
from search.hetero_price import PoolKey, Pricing, pool_keys
from search.hetero_types import HeteroCandidate, HeteroRequest, HeteroResult, HeteroStats, ReplicaSpec
from search.hetero_units import Mix, Pool, every_mix, kinds, mix_count, packings, pools
from search.stages import SMALL_SPLITS


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
    found: list[tuple[float, int, _Found]] = []
    evaluated, exact = 0, True
    for base, pool_list, mixes, complete in _bases(model, cluster, req):
        exact = exact and complete and _splits_exact(model, base.pp)
        keys = pool_keys(pool_list)
        for mix in mixes:
            got = _price_mix(pricing, base, keys, mix, req)
            evaluated += 1
            if got is not None:
                _keep(found, _Found(got[0], base, tuple(pool_list), mix, got[1]), req.top_k, evaluated)
    ranked = [f for _, _, f in sorted(found, key=lambda x: (-x[0], -x[1]))]
    candidates = tuple(_assemble(pricing, f, req.recomputes) for f in ranked)
    stats = HeteroStats(evaluated, "optimal" if exact else "feasible", 0.0 if exact else None, time.perf_counter() - start)
    return HeteroResult(candidates[0] if candidates else None, candidates[1:], stats)


def _bases(model: ModelSpec, cluster: HeteroCluster, req: HeteroRequest) -> Iterator[tuple[ParallelConfig, list[Pool], list[Mix], bool]]:
    """(base option, pools, mixes to price, whether the mixes are all of them) per option."""
    blocks = sum(isinstance(layer, TransformerLayer) for layer in model.layers)
    gpn = max(g.cluster.gpus_per_node for g in cluster.groups)
    tps = req.tps or tuple(t for t in (1, 2, 4, 8, 16) if t <= gpn)
    pps = req.pps or tuple(range(1, req.max_pp + 1))
    mbs = req.micro_batches or tuple(b for b in (1, 2, 4, 8) if req.global_batch % b == 0)
    for tp in tps:
        pool_list = pools(cluster, tp)
        avail = [len(p.units) for p in pool_list]
        if not pool_list:
            continue
        for pp in (p for p in pps if p <= max(1, blocks) and p <= sum(avail)):
            kind_list = kinds(len(pool_list), pp)
            complete = mix_count(avail, kind_list, req.count_limit + 1) <= req.count_limit
            mixes = list(every_mix(avail, kind_list)) if complete else packings(avail, pp)
            for mb in mbs:
                for zero in req.zeros:
                    base = ParallelConfig(tp=tp, pp=pp, dp=1, micro_batch=mb, global_batch=req.global_batch // mb * mb,
                                          seq_len=req.seq_len, zero=zero, sp=tp > 1)
                    yield base, pool_list, mixes, complete


def _splits_exact(model: ModelSpec, pp: int) -> bool:
    """Whether every stage split of ``pp`` stages is priced (``Pricing.splits``)."""
    return pp == 1 or math.comb(len(model.layers) - 1, pp - 1) <= SMALL_SPLITS


def _price_mix(pricing: Pricing, base: ParallelConfig, keys: list[PoolKey], mix: Mix,
               req: HeteroRequest) -> tuple[float, tuple[tuple[int, ...], ...]] | None:
    """(step time, micro-batches per replica per kind) of the best allocation of ``mix``, or None."""
    replicas = sum(n for _, n in mix)
    total = req.global_batch // base.micro_batch
    used = frozenset(keys[e] for kind, _ in mix for e in kind)
    memo: dict[tuple[int, int], float] = {}

    def time_fn(k: int):
        kind = mix[k][0]

        def t(m: int) -> float:
            if (k, m) not in memo:
                got = pricing.kind_time(kind, keys, used, base, replicas, m, req.recomputes)
                memo[k, m] = math.inf if got is None else got[0]
            return memo[k, m]
        return t

    got = allocate([time_fn(k) for k in range(len(mix))], [n for _, n in mix], total)
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
        for m in row:
            devices = []
            for e in kind:
                devices.append(f.pool_list[e].units[cursor[e]])
                cursor[e] += 1
            _, cfg = pricing.kind_time(kind, keys, used, f.base, replicas, m, modes)
            specs.append(ReplicaSpec(tuple(devices), cfg.stage_layers, m, cfg.recompute))
    return pricing.estimate(f.base, specs)

