"""``meshplan replan plan.json --observed run.json``: re-plan for the cluster as it really ran (issue 22).

Speed inference (:func:`infer_speeds`), from the run record's per-rank times (``rank_times``):

- a rank's busy time per micro-batch in a step is (compute + injected wait) / its micro-batches: what
  its GPU spent on its own work, the gradient sync and the waiting for others left out (runs whose
  ranks held pipeline stages are refused: their busy times differ by the stages' layers as well);
- noise: the median over the timed steps (warm-up left out) discards a step slowed by something
  else (a shared machine, a page fault); then each GPU's speed is the fastest rank of the same GPU
  group's median divided by its own, rounded to ``SPEED_STEP``, and a speed of at least
  ``HEALTHY_ABOVE`` counts as 1 (differences that small are within timing noise and not worth a
  re-plan).

The re-plan is the heterogeneous search on the plan's cluster with those speeds set
(``planner.plans.hetero.plan``); the gain is the plan as it was, priced replica by replica on that
cluster (every replica waits for the slowest at the gradient sync), over the new plan's step.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from costmodel.hetero import ClusterGroup, HeteroCluster
from costmodel.specs import ModelSpec
from planner.errors import InputError
from planner.plans.schema import Plan
from planner.runtime.record import RunRecord
from search.hetero.types import ReplicaSpec

SPEED_STEP = 0.05
"""Inferred speeds are rounded to this step."""
HEALTHY_ABOVE = 0.9
"""Inferred speeds at or above this count as full speed (timing noise)."""


@dataclass(frozen=True)
class Replanned:
    """The re-plan and what it is predicted to gain."""

    speeds: dict[int, float]
    """Inferred speed of every GPU that ran, by cluster-wide index."""
    plan: Plan
    continuing_step_s: float
    """The old plan's predicted step on the cluster as it really is."""
    replanned_step_s: float

    @property
    def gain(self) -> float:
        """Continuing as planned over the re-plan (> 1: the re-plan is faster)."""
        return self.continuing_step_s / self.replanned_step_s


def infer_speeds(record: RunRecord) -> dict[int, float]:
    """Each GPU's speed from the record's per-rank times (see the module docstring)."""
    if not record.rank_times:
        raise InputError("the run record has no per-rank times (rank_times): record it with meshplan run --inject-slowdown "
                         "or a plan of uneven shares")
    if any(r.layers is not None for r in record.rank_times):
        raise InputError("replan infers speeds from runs of whole-model replicas; this run's ranks ran pipeline stages of "
                         "different layers (rank_times.layers), whose busy times differ by their layers, not only by speed")
    busy: dict[int, tuple[int, float]] = {}
    for r in record.rank_times:
        per_step = [(c + w) / r.micro_batches for c, w in zip(r.compute_s, r.wait_s)]
        timed = per_step[record.warmup:] or per_step
        busy[r.gpu] = (r.group, statistics.median(timed))
    fastest: dict[int, float] = {}
    for group, seconds in busy.values():
        fastest[group] = min(fastest.get(group, seconds), seconds)
    speeds = {}
    for gpu, (group, seconds) in sorted(busy.items()):
        speed = round(round(fastest[group] / seconds / SPEED_STEP) * SPEED_STEP, 2)
        speeds[gpu] = 1.0 if speed >= HEALTHY_ABOVE else max(SPEED_STEP, speed)
    return speeds


def as_groups(plan: Plan) -> HeteroCluster:
    """The plan's cluster as groups (a homogeneous plan's cluster is one group of its GPUs)."""
    if plan.hetero is not None:
        return plan.hetero.cluster
    gpn = plan.cluster.gpus_per_node
    gpus = -(-plan.request.gpus // gpn) * gpn
    return HeteroCluster(name=plan.cluster.name, groups=(ClusterGroup(cluster=plan.cluster, gpus=gpus),))


def with_speeds(cluster: HeteroCluster, speeds: dict[int, float]) -> HeteroCluster:
    """``cluster`` with the measured GPUs' speeds set (others keep theirs)."""
    from profiles.degrade import Slowdown, apply

    try:
        return apply(cluster, [Slowdown(gpu, speed) for gpu, speed in sorted(speeds.items())], [])
    except ValueError as err:
        raise InputError(f"the run record does not fit the plan's cluster: {err}") from None


def planned_specs(plan: Plan) -> list[ReplicaSpec]:
    """The old plan's replicas: its ``hetero`` section, or a uniform plan's ranks in Megatron order
    (tp fastest, then dp, then pp: rank = t + tp (d + dp p))."""
    if plan.hetero is not None:
        from planner.plans.hetero.specs import specs_of

        return specs_of(plan.hetero)
    m, cfg = plan.mesh, plan.config
    if m.cp != 1 or plan.schedule.virtual_stages != 1:
        raise InputError(f"replan prices uniform plans with cp 1 and no interleaving; this one has cp {m.cp}, vpp {plan.schedule.virtual_stages}")
    specs = []
    for d in range(m.dp):
        stages = tuple(tuple(t + m.tp * (d + m.dp * p) for t in range(m.tp)) for p in range(m.pp))
        specs.append(ReplicaSpec(stages, cfg.stage_layers, plan.schedule.num_microbatches, cfg.recompute))
    return specs


def replan(plan: Plan, model: ModelSpec, record: RunRecord) -> Replanned:
    """The plan for the cluster as it really ran (see the module docstring)."""
    from planner.plans.hetero.plan import plan_hetero
    from planner.estimation.hetero_result import price_replicas

    _check_match(plan, record)
    speeds = infer_speeds(record)
    cluster = with_speeds(as_groups(plan), speeds)
    base = plan.config.model_copy(update={"layer_recompute": None})
    try:
        continuing = price_replicas(model, cluster, base, planned_specs(plan)).step_time_s
    except ValueError as err:
        raise InputError(f"cannot price the plan on the measured cluster: {err}") from None
    constraints = {name: _fixed(plan, name) for name in ("tp", "pp", "micro_batch")}
    new = plan_hetero(plan.model.arg, model, cluster, cluster.gpus, plan.request.global_batch, plan.request.seq_len,
                      plan.request.top_k, False, plan.model.trace, constraints)
    return Replanned(speeds, new, continuing, new.estimate.step_time_s)


def _fixed(plan: Plan, name: str) -> int | None:
    c = plan.request.constraints
    return c.fixed(name) if c is not None else None


def _check_match(plan: Plan, record: RunRecord) -> None:
    """The record is a run of this plan: same model, batch and number of replicas."""
    ran = record.plan
    if (ran.model_arg, ran.global_batch, ran.seq_len) != (plan.model.arg, plan.request.global_batch, plan.request.seq_len):
        raise InputError(f"the run record is of {ran.model_arg} batch {ran.global_batch} x {ran.seq_len}, the plan of "
                         f"{plan.model.arg} batch {plan.request.global_batch} x {plan.request.seq_len}: pass the run of this plan")
