"""Re-estimates behind the report: per-stage memory, the runners-up's breakdowns, sensitivity.

These need the model, rebuilt from ``plan.model.arg``; the plan file alone carries the chosen
configuration's breakdown only. Everything goes through the cost model that made the plan
(``costmodel.step``), so the numbers are comparable with the plan's own estimate. Sensitivity follows
the usual what-if questions of a capacity review: network bandwidth halved, compute efficiency 10 %
lower (GEMM and attention fractions of peak), one node more or fewer (the best uniform plan there,
found by ``search.core.search_plan`` without stage refinement).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig
from costmodel.step import StepEstimate, estimate_step
from costmodel.table import build_cost_table
from planner.plans.schema import Plan

EFFICIENCY_DROP = 0.10
"""Relative drop of compute efficiency (``gemm_max`` and ``attention``) in the sensitivity table."""
MEMORY_PARTS = ("params", "grads", "optimizer_states", "activations", "buffers")


@dataclass(frozen=True)
class Scenario:
    """One sensitivity row: what changed and the predicted step."""

    label: str
    change: str
    step_time_s: float | None
    peak_memory_gib: float | None
    fits: bool | None
    shape: str = ""
    """The configuration used when the scenario re-plans (node count changes)."""


@dataclass(frozen=True)
class Breakdown:
    """A re-estimated configuration's time and memory split."""

    time_s: dict[str, float]
    link_s: dict[str, float]
    memory_gib: dict[str, float]


@dataclass(frozen=True)
class WhatIf:
    """Re-estimates for the report; ``reason`` says why they are missing when ``available`` is False."""

    available: bool
    reason: str = ""
    rank_memory_gib: list[dict[str, float]] = field(default_factory=list)
    """Memory breakdown of every pipeline rank (params, grads, optimizer_states, activations, buffers)."""
    baseline_step_s: float | None = None
    alternatives: list[Breakdown] = field(default_factory=list)
    """Same order as ``plan.alternatives``."""
    scenarios: list[Scenario] = field(default_factory=list)


def unavailable(reason: str) -> WhatIf:
    """No re-estimates, and why."""
    return WhatIf(available=False, reason=reason)


def what_if(plan: Plan, model: ModelSpec) -> WhatIf:
    """Every re-estimate the report shows."""
    cfg = plan.config
    table = build_cost_table(model, plan.cluster)
    step = estimate_step(table, cfg)
    alts = [_breakdown(estimate_step(table, ParallelConfig(**a.config))) for a in plan.alternatives]
    return WhatIf(available=True, rank_memory_gib=rank_memory(step), baseline_step_s=step.step_time_s,
                  alternatives=alts, scenarios=scenarios(plan, model, step))


def rank_memory(step: StepEstimate) -> list[dict[str, float]]:
    """Per-rank memory breakdown, from the cost model's own per-rank accounting
    (``StepEstimate.rank_memory_breakdown_gib``, behind ``memory_breakdown_gib``)."""
    return [{k: float(parts[k]) for k in MEMORY_PARTS} for parts in step.rank_memory_breakdown_gib]


def _breakdown(step: StepEstimate) -> Breakdown:
    return Breakdown(dict(step.time_breakdown_s), dict(step.link_time_s), dict(step.memory_breakdown_gib))


def scenarios(plan: Plan, model: ModelSpec, base: StepEstimate) -> list[Scenario]:
    """Step time under the sensitivity scenarios (the first row is the plan as re-estimated)."""
    cfg, cluster = plan.config, plan.cluster
    out = [Scenario("as planned", "-", base.step_time_s, base.peak_memory_gib, base.fits)]
    slow_net = cluster.model_copy(update={"network_bandwidth_gbps": cluster.network_bandwidth_gbps / 2})
    out.append(_same_config("network bandwidth halved", f"{cluster.network_bandwidth_gbps:g} -> {slow_net.network_bandwidth_gbps:g} GB/s per GPU", model, slow_net, cfg))
    eff = cluster.efficiency
    worse = eff.model_copy(update={"gemm_max": eff.gemm_max * (1 - EFFICIENCY_DROP), "attention": eff.attention * (1 - EFFICIENCY_DROP)})
    out.append(_same_config("compute efficiency -10 %", f"GEMM {eff.gemm_max:.3f} -> {worse.gemm_max:.3f}, attention {eff.attention:.3f} -> {worse.attention:.3f} of peak",
                            model, cluster.model_copy(update={"efficiency": worse}), cfg))
    g = plan.mesh.gpus_per_node
    for delta, label in ((g, "one more node"), (-g, "one fewer node")):
        out.append(_replan(plan, model, plan.request.gpus + delta, label))
    return out


def _same_config(label: str, change: str, model: ModelSpec, cluster: ClusterSpec, cfg: ParallelConfig) -> Scenario:
    step = estimate_step(build_cost_table(model, cluster), cfg)
    return Scenario(label, change, step.step_time_s, step.peak_memory_gib, step.fits)


def _replan(plan: Plan, model: ModelSpec, gpus: int, label: str) -> Scenario:
    """The best uniform plan on ``gpus`` GPUs for the same request and target."""
    from planner.plans.build import summary
    from search.core import search_plan
    from search.types import SearchRequest

    change = f"{plan.request.gpus} -> {gpus} GPUs"
    if gpus <= 0:
        return Scenario(label, change, None, None, None, "no GPUs left")
    req = SearchRequest(gpus=gpus, global_batch=plan.request.global_batch, seq_len=plan.request.seq_len,
                        target=plan.request.target, top_k=1, nonuniform=False)
    result = search_plan(model, plan.cluster, req)
    if result.best is None and result.nearest_miss is None:
        return Scenario(label, change, None, None, None, "no configuration of the search space applies")
    if result.best is None:
        miss = result.nearest_miss
        return Scenario(label, change, None, miss.estimate.peak_memory_gib, False, f"nothing fits; nearest miss: {summary(miss.config)}")
    best = result.best
    return Scenario(label, change, best.step_time_s, best.estimate.peak_memory_gib, best.fits, "re-planned (uniform): " + summary(best.config))
