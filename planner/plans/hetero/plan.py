"""``planner.plan`` on a mixed or degraded cluster: route to the heterogeneous search, build the plan.

A cluster argument names groups (``dgx-h100:16,dgx-a100:32`` or a groups JSON file) or comes with
``--slow`` / ``--down``: ``planner.intake.groups.resolve_hetero`` loads it (``profiles.groups``, ``profiles.degrade``).
With ``target`` native the plan comes from ``search.hetero.search.search_hetero`` and records every
replica's and stage's GPU group, speed, share and gradient weight (``planner.plans.hetero.schema``).
Megatron-LM, torchtitan and DeepSpeed cannot run uneven shares or per-stage GPU types, so for them
``planner.plans.hetero.uniform`` plans uniformly on the healthy GPUs of one type.
"""

from __future__ import annotations

from typing import Any

from costmodel.hetero import HeteroCluster
from costmodel.specs import ModelSpec
from planner.errors import InputError, NoFeasiblePlanError
from planner.estimation.hetero_result import hetero_estimate_result
from planner.intake.groups import plain_cluster, resolve_hetero
from planner.plans.hetero.schema import HeteroInfo, HeteroReplicaInfo, HeteroStageInfo
from planner.plans.schema import (
    SCHEMA_VERSION,
    Alternative,
    Mesh,
    Plan,
    RequestInfo,
    ScheduleInfo,
    SearchInfo,
    Stage,
)
from search.hetero.types import (
    HeteroCandidate,
    HeteroReplica,
    HeteroRequest,
    HeteroResult,
)

SOLVER = "hetero-enumeration"
"""The plan's ``search.solver`` for heterogeneous plans (mixes enumerated, shares by exact min-max)."""
BOUND_NOTE = ("search packed the GPUs by rule (too many replica mixes to enumerate): optimality_gap is proven against a lower "
              "bound over every mix, split and share of the space (search.hetero.gap: a continuous relaxation at each pool's "
              "layer times; it leaves out gradient sync, optimizer time and activation memory, so the gap overstates the distance "
              "to the optimum)")


def hetero_request(global_batch: int, seq_len: int, top_k: int, constraints: dict[str, Any]) -> HeteroRequest:
    """The search request; ``tp``, ``pp``, ``micro_batch``, ``zero`` may be fixed (an int), nothing else."""
    given = {k: v for k, v in constraints.items() if v is not None}
    unsupported = sorted(k for k in given if k not in ("tp", "pp", "micro_batch", "zero"))
    if unsupported:
        raise InputError(f"--{unsupported[0].replace('_', '-')} is not searched on a heterogeneous cluster "
                         "(fix only --tp, --pp, --micro-batch or --zero there)")
    fixed: dict[str, Any] = {}
    for name, field in (("tp", "tps"), ("pp", "pps"), ("micro_batch", "micro_batches"), ("zero", "zeros")):
        if name in given:
            value = given[name]
            if not isinstance(value, int) and not (isinstance(value, str) and value.isdigit()):
                raise InputError(f"--{name.replace('_', '-')} on a heterogeneous cluster takes one value, got {value!r:.40}")
            fixed[field] = (int(value),)
    return HeteroRequest(global_batch=global_batch, seq_len=seq_len, top_k=max(1, top_k + 1), **fixed)


def plan_hetero(model_arg: Any, model: ModelSpec, cluster: HeteroCluster, gpus: int, global_batch: int, seq_len: int,
                top_k: int, timing: bool, trace: bool, constraints: dict[str, Any], time_limit_s: float | None = None) -> Plan:
    """The heterogeneous search's best plan as a :class:`Plan` (native target), with its gain over the
    homogeneous alternatives (``planner.plans.hetero.gain``; ``time_limit_s`` bounds their searches)."""
    from search.hetero.search import search_hetero

    req = hetero_request(global_batch, seq_len, top_k, constraints)
    result = search_hetero(model, cluster, req)
    if result.best is None or not result.best.fits:
        raise NoFeasiblePlanError(f"no heterogeneous plan fits in memory on {cluster.name} "
                                  "(try more GPUs, a smaller --global-batch or --seq-len)", None)
    fixed = {k: (int(v), int(v)) for k, v in constraints.items() if k in ("tp", "pp", "micro_batch", "zero") and v is not None}
    plan = build_hetero_plan(model_arg, model, cluster, gpus, seq_len, top_k, result, timing, trace, fixed)
    from planner.plans.hetero.gain import baseline_infos

    baselines = baseline_infos(model, cluster, global_batch, seq_len, plan.estimate.step_time_s, time_limit_s, fixed)
    assert plan.hetero is not None
    return plan.model_copy(update={"hetero": plan.hetero.model_copy(update={"baselines": baselines})})


def build_hetero_plan(model_arg: Any, model: ModelSpec, cluster: HeteroCluster, gpus: int, seq_len: int, top_k: int,
                      result: HeteroResult, timing: bool, trace: bool, fixed: dict[str, tuple[int, int]] | None = None) -> Plan:
    """The plan of ``result.best`` (its estimate as ``estimate --plan`` reproduces it); ``fixed`` the
    dimensions the user fixed, echoed in ``request.constraints``."""
    from planner.plans.build import PLANNER_VERSION, _model_info, summary
    from planner.plans.constraints import PlanConstraints

    best = result.best
    assert best is not None
    notes = [] if result.stats.status == "optimal" else [BOUND_NOTE]
    estimate = hetero_estimate_result(model, cluster, best, notes)
    cfg, first = best.config, cluster.groups[0].cluster
    slowest = max(best.replicas, key=lambda r: r.step_time_s)
    return Plan(
        schema_version=SCHEMA_VERSION, planner_version=PLANNER_VERSION, model=_model_info(model_arg, model, trace),
        cluster=first,
        request=RequestInfo(gpus=gpus, global_batch=cfg.global_batch, seq_len=seq_len, target="native", top_k=top_k, time_limit_s=None,
                            constraints=PlanConstraints(**fixed) if fixed else None),
        mesh=Mesh(dp=cfg.dp, tp=cfg.tp, pp=cfg.pp, cp=1, ep=1, sp=cfg.sp, zero=cfg.zero, gpus_per_node=first.gpus_per_node,
                  nodes=sum(g.nodes for g in cluster.groups)),
        schedule=ScheduleInfo(name=cfg.schedule, virtual_stages=1, micro_batch=cfg.micro_batch,
                              num_microbatches=slowest.micro_batches, global_batch=cfg.global_batch),
        stages=_stages(slowest, cluster),
        config=cfg, estimate=estimate,
        alternatives=[_alternative(i + 1, c, best, summary) for i, c in enumerate(result.alternatives[:top_k])],
        search=SearchInfo(wall_time_s=round(result.stats.wall_time_s, 3) if timing else None,
                          candidates_evaluated=result.stats.evaluated, candidates_pruned=result.stats.pruned, solver=SOLVER,
                          status=result.stats.status, optimality_gap=round(result.stats.gap or 0.0, 6), time_limit_s=None),
        hetero=HeteroInfo(cluster=cluster, gpus_used=best.gpus_used, replicas=[_replica(i, r) for i, r in enumerate(best.replicas)]),
    )


def _stages(replica: HeteroReplica, cluster: HeteroCluster) -> list[Stage]:
    """The slowest replica's stages in the contract's form (every replica's are in ``hetero``)."""
    out = []
    for k, s in enumerate(replica.stages):
        nodes = [node_of(cluster, min(s.devices)), node_of(cluster, max(s.devices))]
        out.append(Stage(index=k, pp_rank=k, virtual_chunk=0, layers=list(s.layers), layer_recompute=[replica.recompute] * len(s.layers),
                         ranks=[min(s.devices), max(s.devices)], nodes=nodes, time_per_microbatch_s=s.time_s, memory_gib=s.memory_gib))
    return out


def node_of(cluster: HeteroCluster, gpu: int) -> int:
    """Cluster-wide node index of cluster-wide GPU ``gpu`` (nodes numbered group after group)."""
    for g, group in enumerate(cluster.groups):
        first = cluster.first_gpu(g)
        if gpu < first + group.gpus:
            return cluster.first_node(g) + (gpu - first) // group.cluster.gpus_per_node
    raise ValueError(f"GPU {gpu} is past the cluster's {cluster.gpus} GPUs")


def _replica(index: int, r: HeteroReplica) -> HeteroReplicaInfo:
    stages = [HeteroStageInfo(group=s.group, gpu_cluster=s.cluster, speed=s.speed, layers=list(s.layers), devices=list(s.devices),
                              time_per_microbatch_s=s.time_s, memory_gib=s.memory_gib, capacity_gib=s.capacity_gib) for s in r.stages]
    return HeteroReplicaInfo(index=index, micro_batches=r.micro_batches, share=r.share, grad_weight=r.grad_weight,
                             recompute=r.recompute, step_time_s=r.step_time_s, stages=stages)  # type: ignore[arg-type]


def _alternative(rank: int, c: HeteroCandidate, best: HeteroCandidate, summary: Any) -> Alternative:
    slower = c.step_time_s / best.step_time_s - 1
    shares = ",".join(str(r.micro_batches) for r in c.replicas)
    peak = max(s.memory_gib for r in c.replicas for s in r.stages)
    return Alternative(rank=rank, summary=f"{summary(c.config)}, shares [{shares}] on {c.gpus_used} GPUs",
                       config=c.config.model_dump(mode="json"), step_time_s=c.step_time_s, peak_memory_gib=peak, fits=c.fits,
                       why_lost=f"{slower:.1%} slower ({c.step_time_s:.3f} s vs {best.step_time_s:.3f} s per step)")


_CONSTRAINTS = ("tp", "pp", "cp", "dp", "ep", "vpp", "zero", "micro_batch", "sp", "recompute", "schedule")


def plan_on_groups(homogeneous: Any, kwargs: dict[str, Any], slow: Any, down: Any) -> Plan:
    """``planner.plan`` on a cluster of groups or a degraded one; ``homogeneous`` is
    ``planner.plans.build.plan`` and ``kwargs`` its arguments (``slow`` / ``down`` left out)."""
    from planner.intake.arguments import resolve_model_arg
    from planner.plans.build import check_target_model

    cluster = resolve_hetero(kwargs["cluster"], kwargs["gpus"], slow, down, kwargs["memory_headroom_gib"])
    if plain_cluster(cluster, kwargs["cluster"]):  # e.g. --slow 5=1 on a preset: the plain command's plan
        return homogeneous(**kwargs)
    if cluster.is_homogeneous:  # e.g. --slow 5=1: exactly the group's own cluster
        return homogeneous(**{**kwargs, "cluster": cluster.groups[0].cluster, "memory_headroom_gib": None})
    model = resolve_model_arg(kwargs["model"], kwargs["trace"])
    check_target_model(kwargs["target"], model)
    if kwargs["target"] != "native":
        from planner.plans.hetero.uniform import plan_uniform

        rest = {k: v for k, v in kwargs.items() if k not in ("cluster", "gpus", "target", "memory_headroom_gib")}
        return plan_uniform(cluster, kwargs["target"], homogeneous, **rest)
    if kwargs["precision"] != "bf16" or kwargs["compile"] is not None:
        raise InputError("--precision fp8 and --compile / --no-compile are not planned on a heterogeneous cluster yet (drop them)")
    built = plan_hetero(kwargs["model"], model, cluster, kwargs["gpus"], kwargs["global_batch"], kwargs["seq_len"], kwargs["top_k"],
                        kwargs["timing"], kwargs["trace"], {k: kwargs[k] for k in _CONSTRAINTS}, kwargs["time_limit_s"])
    from planner.plans.hetero.checks import hetero_problems

    problems = hetero_problems(built, model)
    if problems:
        raise RuntimeError("the heterogeneous search produced an invalid plan: " + "; ".join(problems))
    return built
