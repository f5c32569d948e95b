"""Turn the searches' outcomes into sweep points: the batch each point keeps, throughput, memory,
scaling efficiency, time, GPU-hours, cost and energy to train, and the deadline answer per cluster."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from planner.capacity.batch import time_score
from planner.capacity.economics import PowerModel, power_model, training_cost
from planner.capacity.runs import SweepRun
from planner.capacity.result import BatchTry, DeadlineAnswer, PowerInfo, SweepPoint, SweepRequest, SweepResult

if TYPE_CHECKING:
    from planner.plans.constraints import PlanConstraints
    from planner.capacity.runs import Grid, PointKey
    from planner.capacity.runner import Outcome

FORMULAS = [
    "steps S(B) = S_min (1 + B_crit / B), examples E(B) = E_min (1 + B / B_crit) (McCandlish et al. 2018, arXiv:1812.06162 eq. 2.11)",
    "tokens needed at batch B = D (1 + B / B_crit) / 2 for a budget D stated at the critical batch; D when no critical batch is given",
    "time to train = tokens needed / (B x sequence) x step time",
    "GPU-hours = GPUs x time to train / 3600; cost = GPU-hours x price per GPU-hour",
    "energy = time to train x (GPUs x TDP x utilisation + nodes x node overhead); utilisation = (compute + recompute) / step time",
    "scaling efficiency = (tokens/s per GPU) / (tokens/s per GPU at the smallest GPU count of the same cluster, sequence and batch)",
]


def assemble(model: Any, g: Grid, specs: dict[str, Any], points: list[PointKey], outcomes: list[Outcome], target: str,
             gpu_tdp_w: float | None, node_overhead_w: float | None, constraints: PlanConstraints | None = None,
             degraded: dict[str, list[str] | None] | None = None) -> SweepRun:
    """The :class:`~planner.capacity.runs.SweepRun` of a finished sweep; ``degraded`` the ``slow`` /
    ``down`` items echoed in the request."""
    powers = {name: power_model(spec, gpu_tdp_w, node_overhead_w) for name, spec in specs.items()}
    records, plans, reports = [], {}, {}
    for key in points:
        chosen, tries = _choose([outcomes[i] for i in key.tasks], g.critical_batch, len(key.tasks) > 1)
        spec = specs[key.cluster]
        record = _point(key, spec, chosen, tries, g, powers[key.cluster])
        records.append(record)
        if chosen is not None and chosen.plan_json is not None:
            plans[key.index] = chosen.plan_json
            if chosen.report_html is not None:
                reports[key.index] = chosen.report_html
    records = _with_scaling(records)
    request = SweepRequest(model=model if isinstance(model, str) else getattr(model, "name", type(model).__name__),
                           clusters=list(g.clusters), gpus=list(g.gpus), global_batch=list(g.batches.fixed or g.batches.candidates),
                           batch_chosen_per_point=g.batches.chosen_per_point, seq_len=list(g.seq_lens), target=target,
                           tokens=g.tokens, critical_batch=g.critical_batch, deadline_s=g.deadline_s, price_per_gpu_hour=g.prices,
                           constraints=None if constraints is None or constraints.is_empty() else constraints, **(degraded or {}))
    power = [PowerInfo(cluster=c, gpu_tdp_w=p.gpu_tdp_w, gpu_tdp_source=p.gpu_tdp_source, node_overhead_w=p.node_overhead_w,
                       node_overhead_source=p.node_overhead_source) for c, p in powers.items()]
    deadline = _deadline(records, g) if g.deadline_s is not None else None
    result = SweepResult(request=request, points=records, deadline=deadline, power=power, formulas=FORMULAS)
    return SweepRun(result, plans, reports)


def _step_time(outcome: Outcome) -> float | None:
    return json.loads(outcome.plan_json)["estimate"]["step_time_s"] if outcome.plan_json else None


def _choose(outcomes: list[Outcome], critical_batch: int | None, choosing: bool) -> tuple[Outcome, list[BatchTry]]:
    """The outcome a point keeps: the only one, or the batch with the least time to train
    (``planner.capacity.batch.time_score``; ties: the smaller batch), with the candidates it was chosen from."""
    if not choosing:
        return outcomes[0], []
    steps = [_step_time(o) for o in outcomes]
    scores = [time_score(s, o.global_batch, critical_batch) if s is not None else None for o, s in zip(outcomes, steps)]
    ranked = sorted((sc, o.global_batch, i) for i, (o, sc) in enumerate(zip(outcomes, scores)) if sc is not None)
    if not ranked:
        return outcomes[-1], [BatchTry(global_batch=o.global_batch, step_time_s=None, relative_time=None) for o in outcomes]
    best = ranked[0][0]
    tries = [BatchTry(global_batch=o.global_batch, step_time_s=s, relative_time=None if sc is None else sc / best)
             for o, s, sc in zip(outcomes, steps, scores)]
    return outcomes[ranked[0][2]], tries


def _point(key: PointKey, spec: Any, chosen: Outcome, tries: list[BatchTry], g: Grid, power: PowerModel) -> SweepPoint:
    nodes = math.ceil(key.gpus / spec.gpus_per_node)
    base = dict(index=key.index, cluster=key.cluster, gpu=spec.gpu.name, gpus=key.gpus, nodes=nodes, seq_len=key.seq_len, batch_tries=tries)
    if chosen.plan_json is None:
        return SweepPoint(**base, global_batch=None if tries else chosen.global_batch, status="no_plan", reason=chosen.miss)
    from planner.plans.build import summary
    from planner.plans.schema import Plan

    plan = Plan.model_validate_json(chosen.plan_json)
    e = plan.estimate
    figures: dict[str, Any] = {}
    if g.tokens is not None:
        price = g.prices.get(key.cluster)
        cost = training_cost(tokens=g.tokens, step_time_s=e.step_time_s, global_batch=plan.request.global_batch, seq_len=key.seq_len,
                             gpus=key.gpus, nodes=nodes, breakdown=e.time_breakdown_s.model_dump(), price_per_gpu_hour=price,
                             power=power, critical_batch=g.critical_batch)
        figures = dict(tokens_needed=cost.tokens_needed, steps=cost.steps, time_to_train_s=cost.time_to_train_s,
                       time_to_train_days=cost.time_to_train_s / 86400, gpu_hours=cost.gpu_hours, cost_usd=cost.cost_usd,
                       utilisation=cost.utilisation, energy_kwh=cost.energy_kwh,
                       meets_deadline=None if g.deadline_s is None else cost.time_to_train_s <= g.deadline_s)
    m = plan.mesh
    return SweepPoint(**base, global_batch=plan.request.global_batch, status="ok", plan_summary=summary(plan.config),
                      mesh={"dp": m.dp, "tp": m.tp, "pp": m.pp, "cp": m.cp, "ep": m.ep, "sp": m.sp, "zero": m.zero},
                      search_status=plan.search.status, optimality_gap=plan.search.optimality_gap, step_time_s=e.step_time_s,
                      tokens_per_s=e.tokens_per_s, tokens_per_s_per_gpu=e.tokens_per_s / key.gpus, mfu=e.mfu,
                      peak_memory_gib=e.peak_memory_gib, memory_capacity_gib=e.memory_capacity_gib,
                      memory_headroom_gib=e.memory_capacity_gib - e.peak_memory_gib, **figures)


def series_key(p: SweepPoint, chosen: bool) -> tuple:
    """Points of one scaling curve: same cluster and sequence, and the same batch (or both chosen)."""
    return (p.cluster, p.seq_len, "chosen" if chosen else p.global_batch)


def _with_scaling(records: list[SweepPoint]) -> list[SweepPoint]:
    """Each point with its scaling efficiency against the smallest GPU count of its series."""
    chosen = any(p.batch_tries for p in records)
    base: dict[tuple, float] = {}
    for p in sorted((p for p in records if p.status == "ok"), key=lambda p: (p.gpus, p.index)):
        base.setdefault(series_key(p, chosen), p.tokens_per_s_per_gpu)  # type: ignore[arg-type]
    return [p.model_copy(update={"scaling_efficiency": p.tokens_per_s_per_gpu / base[series_key(p, chosen)]}) if p.status == "ok" else p
            for p in records]


def _deadline(records: list[SweepPoint], g: Grid) -> list[DeadlineAnswer]:
    """Per cluster, the point with the fewest GPUs that meets the deadline (ties: cheaper, then faster)."""
    out = []
    for cluster in g.clusters:
        meeting = [p for p in records if p.cluster == cluster and p.meets_deadline]
        best = min(meeting, key=lambda p: (p.gpus, p.cost_usd if p.cost_usd is not None else 0.0, p.time_to_train_s, p.index), default=None)
        out.append(DeadlineAnswer(cluster=cluster, point=best.index if best else None, gpus=best.gpus if best else None,
                                  time_to_train_days=best.time_to_train_days if best else None, cost_usd=best.cost_usd if best else None))
    return out
