"""Pricing a heterogeneous plan with the cost model: each stage on its own group's hardware.

:class:`Pricing` owns the cost tables (one per distinct hardware view, built once) and prices a plan
given as :class:`ReplicaSpec` s (:meth:`Pricing.estimate`, what ``estimate --plan`` reproduces) or one
replica of a kind for a micro-batch share (:meth:`Pricing.kind_time`, what the search minimises).
Both go through ``costmodel.hetero_step.estimate_replica``, so the search and the re-estimate agree
to the last bit.

Hardware view of a stage: its group's cluster scaled to the stage's speed; when the job spans more
than one group or speed, its network is priced as the slowest link the job's gradient ring and
pipeline hops cross (``costmodel.hetero.across_links``: the inter-group links and every used slow
GPU's scaled network). A job on one full-speed group sees exactly that group's ``ClusterSpec``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

import numpy as np

from costmodel.hetero import (
    GroupLink,
    HeteroCluster,
    across_links,
    gradient_weights,
    scale_cluster,
)
from costmodel.hetero_step import ReplicaEstimate, estimate_replica
from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig
from costmodel.table import RECOMPUTE_CODES, CostTable, build_cost_table
from search.hetero.types import HeteroCandidate, HeteroReplica, HeteroStage, ReplicaSpec
from search.hetero.units import Kind, Pool
from search.stage_model import group_costs
from search.stages import SMALL_SPLITS, split_one_chunk, stage_evaluator

FRONT_LAYERS = 40
"""Models with at most this many layers search splits with the stage DP's Pareto front; longer ones
price the bottleneck-optimal split and the balanced one (the DP's window costs too much per kind)."""
PoolKey = tuple[int, float]
"""(group, speed) of a pool: what its hardware view depends on."""


class Pricing:
    """Cost tables of one model on one heterogeneous cluster, and the prices built on them."""

    def __init__(self, model: ModelSpec, cluster: HeteroCluster) -> None:
        self.model, self.cluster = model, cluster
        self._tables: dict[ClusterSpec, CostTable] = {}
        self._splits: dict[tuple, list[tuple[int, ...] | None]] = {}
        self._views: dict[tuple[PoolKey, frozenset[PoolKey]], CostTable] = {}
        self._layer_times: dict[tuple, np.ndarray] = {}
        self._pair_lines: dict[tuple, tuple[float, float]] = {}

    # ------------------------------------------------------------------ hardware views
    def view(self, pool: PoolKey, used: frozenset[PoolKey]) -> ClusterSpec:
        """The hardware a stage on ``pool`` is priced on, in a job using the pools ``used``."""
        group, speed = pool
        return across_links(scale_cluster(self.cluster.groups[group].cluster, speed), self._links(used))

    def table(self, pool: PoolKey, used: frozenset[PoolKey]) -> CostTable:
        """The cost table of ``view(pool, used)`` (built once per distinct view)."""
        hit = self._views.get((pool, used))
        if hit is not None:
            return hit
        spec = self.view(pool, used)
        if spec not in self._tables:
            self._tables[spec] = build_cost_table(self.model, spec)
        self._views[pool, used] = self._tables[spec]
        return self._tables[spec]

    def pair_line(self, stage_pools: Sequence[PoolKey], cfg: ParallelConfig, mode: str,
                  sizes: tuple[int, ...] | None) -> tuple[float, float]:
        """(a, b) with a + b·m a lower bound on a replica's price at m micro-batches under recompute
        ``mode`` and split ``sizes`` (``cfg`` gives the rest of the local view): the pipeline
        m·max + Σ − max over stage times summed from ``layer_times`` (a rank's time is the sum of its
        layers', ``costmodel.ranks``), plus the cluster's smallest fixed step time
        (``EfficiencySpec.step_fixed_s``) for the terms outside the pipeline. Memoised: it does not
        depend on the replica count, the share or the links."""
        key = (tuple(stage_pools), mode, sizes, cfg.tp, cfg.micro_batch, cfg.seq_len, cfg.sp, cfg.zero,
               cfg.dp if cfg.zero == 3 else 0, cfg.pp)
        hit = self._pair_lines.get(key)
        if hit is None:
            view = cfg.model_copy(update={"recompute": mode})
            bounds = self.table(stage_pools[0], frozenset()).bounds(sizes or self.table(stage_pools[0], frozenset()).default_split(cfg.pp))
            times = [float(self.layer_times(pool, view)[bounds[s]:bounds[s + 1]].sum()) for s, pool in enumerate(stage_pools)]
            fixed = min(g.cluster.efficiency.step_fixed_s for g in self.cluster.groups)
            hit = self._pair_lines[key] = (sum(times) - max(times) + fixed, max(times))
        return hit

    def layer_times(self, pool: PoolKey, cfg: ParallelConfig) -> np.ndarray:
        """Per micro-batch time of every model layer on ``pool``'s own hardware under ``cfg``'s local
        view and recompute mode (``search.stage_model.group_costs``; a stage's time is their sum)."""
        key = (pool, cfg.tp, cfg.micro_batch, cfg.seq_len, cfg.sp, cfg.zero, cfg.dp if cfg.zero == 3 else 0, cfg.pp > 1, cfg.recompute)
        hit = self._layer_times.get(key)
        if hit is None:
            table = self.table(pool, frozenset({pool}))
            col = RECOMPUTE_CODES.index(cfg.recompute)
            hit = self._layer_times[key] = group_costs(table, cfg).time_s[table.layer_group, col]
        return hit

    def _links(self, used: frozenset[PoolKey]) -> list[GroupLink]:
        """Links a job on ``used`` crosses: between its groups, and each slow pool's own network."""
        if len(used) <= 1:
            return []
        groups = sorted({g for g, _ in used})
        links = [self.cluster.link(a, b) for a, b in itertools.combinations(groups, 2)]
        for g, speed in sorted(used):
            net = self.cluster.groups[g].cluster
            if speed < 1.0:
                links.append(GroupLink(groups=(g, g), bandwidth_gbps=net.network_bandwidth_gbps * speed,
                                       latency_us=net.network_latency_us))
        return links

    # ------------------------------------------------------------------ one replica
    def replica(self, stage_pools: Sequence[PoolKey], used: frozenset[PoolKey], cfg: ParallelConfig) -> ReplicaEstimate:
        """A replica whose stage s runs on ``stage_pools[s]`` under ``cfg`` (its share and split)."""
        return estimate_replica([self.table(p, used) for p in stage_pools], cfg)

    def splits(self, kind: Kind, keys: Sequence[PoolKey], used: frozenset[PoolKey], cfg: ParallelConfig) -> list[tuple[int, ...] | None]:
        """Stage splits to price for ``kind``: every split when there are at most ``SMALL_SPLITS``
        (exact), else the Pareto front of the stage dynamic program (``search.stages``) run with each
        stage on its own group's costs, and the balanced split."""
        n, pp = len(self.model.layers), cfg.pp
        if pp == 1:
            return [None]
        if math.comb(n - 1, pp - 1) <= SMALL_SPLITS:
            return [tuple(b - a for a, b in zip((0,) + cut, cut + (n,))) for cut in itertools.combinations(range(1, n), pp - 1)]
        key = (kind, tuple(keys[e] for e in kind), cfg.tp, cfg.micro_batch, cfg.zero, cfg.recompute)
        if key not in self._splits:
            if n <= FRONT_LAYERS:
                self._splits[key] = self._front(kind, keys, used, cfg)
            else:
                self._splits[key] = list(dict.fromkeys([self._minmax(kind, keys, cfg), None]))
        return self._splits[key]

    def _minmax(self, kind: Kind, keys: Sequence[PoolKey], cfg: ParallelConfig) -> tuple[int, ...]:
        """The contiguous split whose slowest stage is fastest, each layer timed on its stage's pool
        (bisection on the bottleneck with a greedy fill: the linear-partition problem)."""
        per_pool = {e: np.concatenate([[0.0], np.cumsum(self.layer_times(keys[e], cfg))]) for e in set(kind)}
        n, lo, hi = len(self.model.layers), 0.0, sum(float(per_pool[e][-1]) for e in set(kind))
        best = None
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            sizes = _greedy_fill([per_pool[e] for e in kind], n, mid)
            if sizes is None:
                lo = mid
            else:
                hi, best = mid, sizes
        return best if best is not None else tuple(self.table(keys[kind[0]], frozenset()).default_split(cfg.pp))

    def _front(self, kind: Kind, keys: Sequence[PoolKey], used: frozenset[PoolKey], cfg: ParallelConfig) -> list[tuple[int, ...] | None]:
        """Splits of the stage DP's front, each stage's cost from its own table (memory per GPU type)."""
        cfg = cfg.model_copy(update={"global_batch": max(cfg.pp, cfg.num_microbatches) * cfg.micro_batch * cfg.dp})
        modes = (RECOMPUTE_CODES.index(cfg.recompute),)
        evaluators = {}
        for e in set(kind):
            table = self.table(keys[e], used)
            evaluators[e] = stage_evaluator(table, cfg, group_costs(table, cfg), modes)
        first = self.table(keys[kind[0]], used)
        plans = split_one_chunk(first, cfg, lambda s, a, b: evaluators[kind[s]](s, a, b), first.default_split(cfg.pp))
        return list(dict.fromkeys([p.sizes for p in plans] + [None]))

    # ------------------------------------------------------------------ a whole plan
    def estimate(self, base: ParallelConfig, specs: Sequence[ReplicaSpec]) -> HeteroCandidate:
        """Price a plan given replica by replica (``estimate --plan``): ``base`` holds the job-level
        degrees; each replica's share, split and recomputation come from its spec."""
        stage_keys = [[self.pool_of(devices) for devices in spec.stage_devices] for spec in specs]
        used = frozenset(k for keys in stage_keys for k in keys)
        weights = gradient_weights([s.micro_batches for s in specs])
        total = sum(s.micro_batches for s in specs)
        replicas = []
        for spec, keys, weight in zip(specs, stage_keys, weights):
            cfg = _share(base, len(specs), spec.micro_batches).model_copy(
                update={"stage_layers": spec.stage_layers, "recompute": spec.recompute})
            est = self.replica(keys, used, cfg)
            replicas.append(self._replica(spec, keys, est, cfg, spec.micro_batches / total, weight))
        job = base.model_copy(update={"dp": len(specs), "global_batch": total * base.micro_batch})
        return HeteroCandidate(job, tuple(replicas), max(r.step_time_s for r in replicas))

    def pool_of(self, devices: Iterable[int]) -> PoolKey:
        """(group, speed) of a stage's GPUs: they must share a group; the slowest speed counts."""
        located = [self._locate(d) for d in devices]
        groups = {g for g, _ in located}
        if len(groups) != 1:
            raise ValueError(f"a stage's GPUs {sorted(devices)} span groups {sorted(groups)}: TP stays inside one group")
        return located[0][0], min(self.cluster.groups[g].speed(i) for g, i in located)

    def _locate(self, gpu: int) -> tuple[int, int]:
        for g, group in enumerate(self.cluster.groups):
            first = self.cluster.first_gpu(g)
            if first <= gpu < first + group.gpus:
                return g, gpu - first
        raise ValueError(f"GPU {gpu} is past the cluster's {self.cluster.gpus} GPUs")

    def _replica(self, spec: ReplicaSpec, keys: list[PoolKey], est: ReplicaEstimate, cfg: ParallelConfig,
                 share: float, weight: float) -> HeteroReplica:
        n = len(self.model.layers)
        sizes = cfg.stage_layers or self.table(keys[0], frozenset(keys)).default_split(cfg.pp)
        bounds = list(itertools.accumulate((0,) + tuple(sizes)))
        stages = tuple(
            HeteroStage(group=k[0], cluster=self.cluster.groups[k[0]].cluster.name, speed=k[1],
                        layers=tuple(range(bounds[s], min(n, bounds[s + 1]))), devices=tuple(spec.stage_devices[s]),
                        time_s=est.stage_time_s[s], memory_gib=est.stage_memory_gib[s], capacity_gib=est.stage_capacity_gib[s])
            for s, k in enumerate(keys))
        return HeteroReplica(stages, spec.micro_batches, share, weight, cfg.recompute, est.step_time_s)


def _greedy_fill(prefixes: Sequence[np.ndarray], n: int, limit: float) -> tuple[int, ...] | None:
    """Sizes filling stages in order with layers while each stays within ``limit`` (every stage at
    least one layer; ``prefixes[s]`` are stage s's pool's prefix sums of layer times), or None when
    the layers do not fit in the stages."""
    sizes, start, stages = [], 0, len(prefixes)
    for s, prefix in enumerate(prefixes):
        room = n - (stages - s - 1)
        end = int(np.searchsorted(prefix, prefix[start] + limit, side="right")) - 1
        end = min(max(end, start + 1), room)
        sizes.append(end - start)
        start = end
    return tuple(sizes) if start == n else None


def _share(base: ParallelConfig, replicas: int, m: int) -> ParallelConfig:
    """``base`` for one replica running ``m`` micro-batches among ``replicas`` (ZeRO and the gradient
    ring span all of them): ``dp = replicas``, ``global_batch = m · micro_batch · replicas``."""
    return base.model_copy(update={"dp": replicas, "global_batch": m * base.micro_batch * replicas})


def pool_keys(pool_list: Sequence[Pool]) -> list[PoolKey]:
    """(group, speed) of each pool."""
    return [(p.group, p.speed) for p in pool_list]
