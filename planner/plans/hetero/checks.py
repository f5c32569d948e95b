"""The validator of heterogeneous plans, written apart from the search (issue 22).

:func:`hetero_problems` checks a plan's ``hetero`` section against its own cluster and model:

- every device is a GPU of the cluster, used once, on a node that is up;
- each stage's devices are ``tp`` GPUs of one node of one group, the group and the GPU type it
  names, at the speed of its slowest GPU;
- each replica's stages cover the model's layers in order, contiguously, each non-empty;
- the shares: micro-batches x micro-batch sum to the global batch, each share is its fraction and
  each gradient weight is ``D m_r / M`` (the uniform-batch update);
- memory: each stage re-estimated on its own GPU type with the cost model (``costmodel.step``, not
  the search) fits that GPU's capacity and equals the stored figure;
- the target is native (no engine export runs uneven shares or per-stage GPU types);
- the stored estimate is the re-pricing of the replicas (what ``estimate --plan`` prints);
- each homogeneous baseline's speedup is its step over the plan's (``planner.plans.hetero.gain``).
"""

from __future__ import annotations

import math

from costmodel.headroom import usable_gib
from costmodel.hetero import HeteroCluster, gradient_weights
from costmodel.specs import ModelSpec, ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import CostTable, build_cost_table
from planner.plans.hetero.schema import HeteroInfo, HeteroReplicaInfo, HeteroStageInfo
from planner.plans.schema import Plan

REL_TOL = 1e-9
"""Stored figures against their re-estimate (same code, same inputs)."""


def hetero_problems(plan: Plan, model: ModelSpec) -> list[str]:
    """Every problem of a heterogeneous plan, one clause each (empty: valid)."""
    info = plan.hetero
    if info is None:
        return ["the plan has no hetero section"]
    problems = _devices(info) + _shares(plan, info) + _baselines(plan, info)
    if plan.request.target != "native":
        problems.append(f"target {plan.request.target} cannot run uneven shares or per-stage GPU types: a heterogeneous plan is native")
    for r in info.replicas:
        problems += _replica_layers(r, len(model.layers))
        problems += [p for s in r.stages for p in _stage(plan, info.cluster, r, s)]
    if problems:
        return problems
    return _memory(plan, info, model) + _estimate(plan, info, model)


def _baselines(plan: Plan, info: HeteroInfo) -> list[str]:
    """Each recorded speedup is the baseline's step over the plan's (None exactly when no step)."""
    from planner.plans.hetero.gain import speedup

    return [f"baseline {b.name}: speedup {b.speedup} is not its step over the plan's ({speedup(b.step_time_s, plan.estimate.step_time_s)})"
            for b in info.baselines or [] if b.speedup != speedup(b.step_time_s, plan.estimate.step_time_s)]


def _devices(info: HeteroInfo) -> list[str]:
    """Devices inside the cluster, unique, on nodes that are up."""
    seen: set[int] = set()
    problems = []
    cluster = info.cluster
    for r in info.replicas:
        for s in r.stages:
            for d in s.devices:
                if not 0 <= d < cluster.gpus:
                    problems.append(f"replica {r.index}: GPU {d} is past the cluster's {cluster.gpus} GPUs")
                elif d in seen:
                    problems.append(f"replica {r.index}: GPU {d} is used twice")
                elif _locate(cluster, d)[2] in cluster.groups[_locate(cluster, d)[0]].down_nodes:
                    problems.append(f"replica {r.index}: GPU {d} is on a node that is down")
                seen.add(d)
    if len(seen) != info.gpus_used:
        problems.append(f"hetero.gpus_used is {info.gpus_used}, the replicas use {len(seen)} GPUs")
    return problems


def _stage(plan: Plan, cluster: HeteroCluster, r: HeteroReplicaInfo, s: HeteroStageInfo) -> list[str]:
    """TP inside one node of one group, the right group, type and speed."""
    where = f"replica {r.index} stage with GPUs {s.devices}"
    if len(s.devices) != plan.mesh.tp:
        return [f"{where}: {len(s.devices)} GPUs, but tp is {plan.mesh.tp}"]
    if any(not 0 <= d < cluster.gpus for d in s.devices):
        return []  # reported by _devices
    located = [_locate(cluster, d) for d in s.devices]
    if len({(g, n) for g, _, n in located}) != 1:
        return [f"{where}: tensor parallelism spans nodes or groups {sorted({(g, n) for g, _, n in located})}"]
    group = located[0][0]
    problems = []
    if s.group != group or s.gpu_cluster != cluster.groups[group].cluster.name:
        problems.append(f"{where}: says group {s.group} ({s.gpu_cluster}), its GPUs are group {group} ({cluster.groups[group].cluster.name})")
    speed = min(cluster.groups[group].speed(i) for _, i, _ in located)
    if s.speed != speed:
        problems.append(f"{where}: speed {s.speed:g}, its slowest GPU runs at {speed:g}")
    return problems


def _replica_layers(r: HeteroReplicaInfo, n: int) -> list[str]:
    """Stages cover layers 0..n-1 in order, contiguously, none empty."""
    flat = [i for s in r.stages for i in s.layers]
    if flat != list(range(n)) or any(not s.layers for s in r.stages):
        return [f"replica {r.index}: its stages do not cover the model's {n} layers in order, each stage non-empty"]
    return []


def _shares(plan: Plan, info: HeteroInfo) -> list[str]:
    """Micro-batches sum to the batch; shares and gradient weights agree with them."""
    counts = [r.micro_batches for r in info.replicas]
    if not counts or any(m <= 0 for m in counts):
        return ["every replica needs at least one micro-batch"]
    problems = []
    total, mb = sum(counts), plan.schedule.micro_batch
    if total * mb != plan.request.global_batch:
        problems.append(f"shares {counts} x micro-batch {mb} = {total * mb} sequences, the global batch is {plan.request.global_batch}")
    if len(counts) != plan.mesh.dp:
        problems.append(f"{len(counts)} replicas, but mesh.dp is {plan.mesh.dp}")
    for r, w in zip(info.replicas, gradient_weights(counts)):
        if not math.isclose(r.share, r.micro_batches / total, rel_tol=REL_TOL) or not math.isclose(r.grad_weight, w, rel_tol=REL_TOL):
            problems.append(f"replica {r.index}: share {r.share:g} / gradient weight {r.grad_weight:g}, its micro-batches give "
                            f"{r.micro_batches / total:g} / {w:g}")
    return problems


def _memory(plan: Plan, info: HeteroInfo, model: ModelSpec) -> list[str]:
    """Each stage's memory, re-estimated on its own GPU type, fits and equals the stored figure."""
    tables: dict[int, CostTable] = {}
    problems = []
    for r in info.replicas:
        cfg = replica_config(plan.config, len(info.replicas), r)
        for k, s in enumerate(r.stages):
            if s.group not in tables:
                tables[s.group] = build_cost_table(model, info.cluster.groups[s.group].cluster)
            table = tables[s.group]
            memory = float(estimate_step(table, cfg).rank_memory_gib[k])
            capacity = usable_gib(table.cluster)
            if memory > capacity:
                problems.append(f"replica {r.index} stage {k}: needs {memory:.1f} GiB of its {capacity:.1f} GiB {table.cluster.gpu.name}")
            if not math.isclose(memory, s.memory_gib, rel_tol=1e-6):
                problems.append(f"replica {r.index} stage {k}: stored memory {s.memory_gib:.3f} GiB, re-estimated {memory:.3f} GiB")
    return problems


def _estimate(plan: Plan, info: HeteroInfo, model: ModelSpec) -> list[str]:
    """The stored step time is the re-pricing of the replicas."""
    from planner.estimation.hetero_result import price_replicas
    from planner.plans.hetero.specs import specs_of

    cand = price_replicas(model, info.cluster, plan.config, specs_of(info))
    if not math.isclose(cand.step_time_s, plan.estimate.step_time_s, rel_tol=REL_TOL):
        return [f"stored step {plan.estimate.step_time_s:.6g} s, the replicas re-priced give {cand.step_time_s:.6g} s"]
    return []


def replica_config(job: ParallelConfig, replicas: int, r: HeteroReplicaInfo) -> ParallelConfig:
    """One replica's configuration: its share of micro-batches, its split and recomputation."""
    sizes = tuple(len(s.layers) for s in r.stages)
    return job.model_copy(update={"dp": replicas, "global_batch": r.micro_batches * job.micro_batch * replicas,
                                  "stage_layers": sizes if len(sizes) > 1 else None, "recompute": r.recompute})


def _locate(cluster: HeteroCluster, gpu: int) -> tuple[int, int, int]:
    """(group, GPU inside the group, node inside the group) of a cluster-wide GPU index."""
    for g, group in enumerate(cluster.groups):
        first = cluster.first_gpu(g)
        if gpu < first + group.gpus:
            local = gpu - first
            return g, local, local // group.cluster.gpus_per_node
    raise ValueError(f"GPU {gpu} is past the cluster")
