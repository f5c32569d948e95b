"""The homogeneous alternatives a heterogeneous plan is compared with (issue 22: "the gain over the
best homogeneous alternatives"), each planned by the homogeneous search (``search.core``).

- Mixed GPU types (ranked by peak bf16 FLOP/s, then memory): the fastest type's group alone (its healthy nodes: up, every GPU at full speed),
  and every GPU that is up planned as if it were the slowest type (whole nodes of it).
- Slow GPUs or lost nodes on one GPU type (one group, or a preset's whole nodes and its partial
  last node, ``profiles.one_cluster``): the straggler-blind plan (the best uniform plan of the
  GPUs that are up, as a planner that ignores speeds finds it, laid out replica after replica in GPU
  order with equal shares and priced on the degraded cluster by ``search.hetero.price.Pricing``, so
  every replica waits for its slowest GPU), and the same search on the healthy nodes only (on the
  GPUs at full speed where no whole node is).

Every search takes the constraints the heterogeneous plan was given (a fixed TP degree, pipeline
depth, micro-batch or ZeRO stage), so that each compares the same job. The straggler-blind search
also keeps to what ``Pricing`` prices (no context parallelism, no interleaving,
uniform splits and recomputation). Each search has a wall-clock limit (``time_limit_s``): a search
that reaches it returns its best so far, with status ``timeout``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from costmodel.hetero import ClusterGroup, HeteroCluster
from costmodel.specs import ModelSpec, ParallelConfig
from search.hetero.price import Pricing
from search.hetero.types import ReplicaSpec
from search.types import Constraints, SearchRequest

BASELINE_TIME_LIMIT_S = 2.0
"""Default wall-clock limit of each baseline search (the 1,024-GPU Llama 3.1 70B searches take under
1 s of CPU; the limit only guards a much larger model or cluster)."""


@dataclass(frozen=True)
class Baseline:
    """One homogeneous alternative and its best plan's step (None: no plan fits, or none applies)."""

    name: str
    """fastest-group, all-as-slowest, straggler-blind or healthy-only."""
    label: str
    """What it is, for a person (e.g. "16 x dgx-h100 alone")."""
    gpus: int
    step_time_s: float | None
    config: ParallelConfig | None
    status: str
    """The homogeneous search's status (optimal, feasible, timeout), or "no plan fits"."""


def homogeneous_baselines(model: ModelSpec, cluster: HeteroCluster, global_batch: int, seq_len: int,
                          time_limit_s: float | None = BASELINE_TIME_LIMIT_S, constraints: Constraints | None = None) -> list[Baseline]:
    """The baselines of the module docstring that apply to ``cluster``, under ``constraints``; each
    search stops at ``time_limit_s`` wall-clock seconds (None: no limit)."""
    groups, limits = cluster.groups, constraints or Constraints()
    job = (global_batch, seq_len, time_limit_s, limits)
    out: list[Baseline] = []
    if len({g.cluster.name for g in groups}) > 1:
        fast = max(range(len(groups)), key=lambda g: (_power(groups[g]), -g))
        slow = min(range(len(groups)), key=lambda g: (_power(groups[g]), g))
        f, s = groups[fast], groups[slow]
        healthy = len(healthy_local_nodes(f)) * f.cluster.gpus_per_node
        whole = f"{healthy} x {f.cluster.name}" + (" alone" if healthy == f.gpus else " alone (healthy nodes)")
        out.append(_searched("fastest-group", whole, model, f, healthy, *job))
        alive = sum(len(g.alive_nodes()) * g.cluster.gpus_per_node for g in groups)
        alive -= alive % s.cluster.gpus_per_node
        out.append(_searched("all-as-slowest", f"all {alive} GPUs as {s.cluster.name}", model, s, alive, *job))
    elif any(_degraded(g) for g in groups):  # one type: one group, or whole nodes and a partial last node
        out.append(straggler_blind(model, cluster, *job))
        healthy = sum(len(healthy_local_nodes(g)) * g.cluster.gpus_per_node for g in groups) or _full_speed_gpus(groups)
        out.append(_searched("healthy-only", f"healthy {healthy} GPUs only", model, _widest(groups), healthy, *job))
    return out


def straggler_blind(model: ModelSpec, cluster: HeteroCluster, global_batch: int, seq_len: int, time_limit_s: float | None,
                    constraints: Constraints | None = None) -> Baseline:
    """The best uniform plan of the GPUs that are up, priced on the degraded cluster (one GPU type:
    one group, or a preset's whole nodes and its partial last node, ``profiles.one_cluster``)."""
    g = _widest(cluster.groups)
    alive = [cluster.first_gpu(k) + n * group.cluster.gpus_per_node + i for k, group in enumerate(cluster.groups)
             for n in group.alive_nodes() for i in range(group.cluster.gpus_per_node)]
    label = "uniform plan, straggler-blind"
    limits = replace(constraints or Constraints(), cp=(1, 1), vpp=(1, 1), ep=(1, 1), schedule="1f1b")
    req = SearchRequest(gpus=len(alive), global_batch=global_batch, seq_len=seq_len, top_k=1, time_limit_s=time_limit_s,
                        nonuniform=False, constraints=limits)
    from search.core import search_plan

    result = search_plan(model, g.cluster, req)
    if result.best is None:
        return Baseline("straggler-blind", label, len(alive), None, None, "no plan fits")
    cfg = result.best.config
    priced = Pricing(model, cluster).estimate(cfg.model_copy(update={"layer_recompute": None}), uniform_layout(cfg, alive))
    step = priced.step_time_s if priced.fits else None
    return Baseline("straggler-blind", label, len(alive), step, cfg, result.stats.status if priced.fits else "no plan fits")


def uniform_layout(cfg: ParallelConfig, gpus: list[int]) -> list[ReplicaSpec]:
    """A uniform configuration on ``gpus`` in order: replica r's stage s takes the next ``tp`` GPUs;
    every replica runs the same micro-batches (what Megatron-LM, torchtitan and DeepSpeed run)."""
    per = cfg.tp * cfg.pp
    return [ReplicaSpec(tuple(tuple(gpus[r * per + s * cfg.tp: r * per + (s + 1) * cfg.tp]) for s in range(cfg.pp)),
                        cfg.stage_layers, cfg.num_microbatches, cfg.recompute) for r in range(cfg.dp)]


def healthy_local_nodes(group: ClusterGroup) -> list[int]:
    """The group's nodes (group-local indices) that are up with every GPU at full speed."""
    gpn = group.cluster.gpus_per_node
    return [n for n in group.alive_nodes() if all(group.speed(n * gpn + i) == 1.0 for i in range(gpn))]


def _full_speed_gpus(groups: tuple[ClusterGroup, ...]) -> int:
    """GPUs that are up at full speed: the healthy-only baseline where no whole node is healthy (a
    cluster of one node, or part of one, with a slow GPU), as a partial node the plain command plans on."""
    return sum(g.speed(n * g.cluster.gpus_per_node + i) == 1.0
               for g in groups for n in g.alive_nodes() for i in range(g.cluster.gpus_per_node))


def _widest(groups: tuple[ClusterGroup, ...]) -> ClusterGroup:
    """The group with the most GPUs per node: the preset itself when a partial last node is a group."""
    return max(groups, key=lambda g: g.cluster.gpus_per_node)


def _power(group: ClusterGroup) -> tuple[float, float]:
    """How a GPU type ranks: peak bf16 FLOP/s, then memory (A100 80 GB above A100 40 GB)."""
    return group.cluster.gpu.peak_bf16_tflops, group.cluster.gpu.hbm_gib


def _degraded(group: ClusterGroup) -> bool:
    return bool(group.down_nodes) or any(group.speed(i) < 1.0 for i in range(group.gpus))


def _searched(name: str, label: str, model: ModelSpec, group: ClusterGroup, gpus: int, global_batch: int, seq_len: int,
              time_limit_s: float | None, constraints: Constraints) -> Baseline:
    """The homogeneous search's best plan on ``gpus`` GPUs of ``group``'s type."""
    from search.core import search_plan

    if gpus <= 0:
        return Baseline(name, label, gpus, None, None, "no plan fits")
    req = SearchRequest(gpus=gpus, global_batch=global_batch, seq_len=seq_len, top_k=1, time_limit_s=time_limit_s, constraints=constraints)
    result = search_plan(model, group.cluster, req)
    if result.best is None:
        return Baseline(name, label, gpus, None, None, "no plan fits")
    return Baseline(name, label, gpus, result.best.step_time_s, result.best.config, result.stats.status)
