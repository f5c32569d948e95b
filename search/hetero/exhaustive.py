"""Brute force over the heterogeneous space, to check ``search.hetero.search`` on small clusters.

Written apart from the search's shortcuts: it prices every replica mix, every way of sharing the
micro-batches among the replicas (up to the order of equal replicas), every stage split and every
recompute mode, each replica straight through ``Pricing.replica`` (no curves, no line fits, no
threshold allocation, no mode dominance). Only for small cases: the work grows as the compositions
of the micro-batches times the splits.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from costmodel.hetero import HeteroCluster
from costmodel.specs import ModelSpec, ParallelConfig
from search.hetero.search import bases
from search.hetero.price import Pricing, _share, pool_keys
from search.hetero.types import HeteroRequest
from search.hetero.units import Mix, every_mix


@dataclass(frozen=True)
class ExhaustiveBest:
    """The optimum of the space and where it was found."""

    step_time_s: float
    base: ParallelConfig
    mix: Mix
    shares: tuple[tuple[int, ...], ...]
    plans: int
    """Plans (mix x sharing) priced."""


def exhaustive_hetero(model: ModelSpec, cluster: HeteroCluster, req: HeteroRequest) -> ExhaustiveBest | None:
    """The fastest fitting plan of the space by enumeration, or None when nothing fits."""
    pricing = Pricing(model, cluster)
    best: ExhaustiveBest | None = None
    plans = 0
    for base, pool_list, _, _ in bases(model, cluster, req):
        keys = pool_keys(pool_list)
        for mix in every_mix([len(p.units) for p in pool_list], _kinds_of(len(pool_list), base.pp)):
            replicas = sum(n for _, n in mix)
            used = frozenset(keys[e] for kind, _ in mix for e in kind)
            memo: dict[tuple, float] = {}
            for shares in _sharings([n for _, n in mix], req.global_batch // base.micro_batch):
                plans += 1
                worst = max(_replica_time(pricing, memo, kind, keys, used, base, replicas, m, req.recomputes)
                            for (kind, _), row in zip(mix, shares) for m in row)
                if not math.isinf(worst) and (best is None or worst < best.step_time_s):
                    best = ExhaustiveBest(worst, base, mix, shares, 0)
    return None if best is None else ExhaustiveBest(best.step_time_s, best.base, best.mix, best.shares, plans)


def _kinds_of(pools: int, pp: int) -> list[tuple[int, ...]]:
    """Every kind: one pool, or two pools each in one contiguous run, either order."""
    out = [(e,) * pp for e in range(pools)]
    for a, b in itertools.permutations(range(pools), 2):
        out += [(a,) * k + (b,) * (pp - k) for k in range(1, pp)]
    return out


def _sharings(counts: list[int], total: int) -> Iterator[tuple[tuple[int, ...], ...]]:
    """Every split of ``total`` micro-batches, at least one each, over the replicas of each kind
    (equal replicas in non-increasing order: the others are the same plans relabelled)."""
    replicas = sum(counts)
    for cut in itertools.combinations(range(1, total), replicas - 1):
        parts = [b - a for a, b in zip((0,) + cut, cut + (total,))]
        rows, i = [], 0
        for n in counts:
            rows.append(tuple(parts[i:i + n]))
            i += n
        if all(list(row) == sorted(row, reverse=True) for row in rows):
            yield tuple(rows)


def _replica_time(pricing: Pricing, memo: dict, kind, keys, used, base: ParallelConfig, replicas: int, m: int,
                  modes: tuple[str, ...]) -> float:
    """Fastest fitting price of one replica over every mode and split (``math.inf`` if none fits)."""
    if (kind, m) in memo:
        return memo[kind, m]
    n, best = len(pricing.model.layers), math.inf
    splits = [None] if base.pp == 1 else [
        tuple(b - a for a, b in zip((0,) + cut, cut + (n,))) for cut in itertools.combinations(range(1, n), base.pp - 1)]
    for mode in modes:
        for sizes in splits:
            cfg = _share(base, replicas, m).model_copy(update={"recompute": mode, "stage_layers": sizes})
            est = pricing.replica([keys[e] for e in kind], used, cfg)
            if est.fits:
                best = min(best, est.step_time_s)
    memo[kind, m] = best
    return best
