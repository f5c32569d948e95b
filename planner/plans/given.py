"""The plan file of one given configuration: ``meshplan estimate ... -o plan.json`` and
``planner.config_plan(...)`` / ``planner.save_plan(...)``.

The plan holds exactly the configuration ``planner.estimate`` estimates for the same keywords (its
default split and recomputation, its assumptions), so that ``meshplan validate`` accepts it and
``meshplan estimate --plan`` reproduces the estimate. Its ``request.constraints`` fix every
dimension the configuration sets (tp, pp, cp, dp, ep, vpp, ZeRO, micro-batch, SP, recompute,
schedule); ``search`` records that nothing was searched (one candidate, solver ``given``) and the
gap to the search's lower bound over every stage split and recomputation of that shape
(``search.bounds.bound_s``), so a reviewer sees how much a search of the split might still gain.
A configuration that does not fit in memory has no plan (``NoFeasiblePlanError``, exit 3).
"""

from __future__ import annotations

import os
from typing import Any

from costmodel.specs import ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.plans.constraints import PlanConstraints
from planner.errors import InputError, NoFeasiblePlanError
from planner.atomic import write_atomic
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
from planner.plans.schema import Plan
from search.types import Candidate, Constraints, SearchRequest, SearchResult, SearchStats

GIVEN_SOLVER = "given (meshplan estimate: the configuration was not searched)"


def config_plan(**settings: Any) -> Plan:
    """The plan of the configuration ``planner.estimate(**settings)`` estimates (the same keywords:
    model, cluster, gpus, global_batch, seq_len, the degrees, recompute, zero, target, ...).

    The plan is for ``settings["target"]`` (default native); a configuration that engine cannot
    express raises :class:`InputError` naming why. Raises :class:`NoFeasiblePlanError` when the
    configuration does not fit in memory, and whatever ``planner.estimate`` raises for bad input.
    """
    from planner.estimation.estimate import estimate
    from planner.plans.build import build_plan
    from planner.plans.plan_checks import plan_problems
    from search.bounds import bound_s

    result = estimate(**settings)
    if not result.fits:
        raise NoFeasiblePlanError(
            f"the configuration needs {result.peak_memory_gib:.1f} GiB per GPU of {result.memory_capacity_gib:.1f} GiB (short by "
            f"{result.over_by_gib:.1f} GiB), and a plan file holds only configurations that fit; drop -o to see the "
            "estimate, or let meshplan plan search with some of these dimensions fixed", result.over_by_gib)
    trace, target = bool(settings.get("trace")), settings.get("target") or "native"
    model_spec, cluster_spec = resolve_model_arg(settings["model"], trace), resolve_cluster_arg(settings["cluster"])
    cfg = ParallelConfig.model_validate(result.config)
    table = build_cost_table(model_spec, cluster_spec)
    step = estimate_step(table, cfg)
    req = SearchRequest(gpus=cfg.num_gpus, global_batch=cfg.global_batch, seq_len=cfg.seq_len, target=target, top_k=0,  # type: ignore[arg-type]
                        constraints=Constraints(**fixed_constraints(cfg).model_dump()))
    gap = max(0.0, 1.0 - bound_s(table, cfg) / step.step_time_s)
    stats = SearchStats(1, 0, GIVEN_SOLVER, "optimal" if gap == 0.0 else "feasible", gap, 0.0)
    candidate = Candidate(cfg, step)
    built = build_plan(settings["model"], model_spec, cluster_spec, req, SearchResult(candidate, (), stats), False, trace, result.assumptions)
    problems = plan_problems(built, model_spec)
    if problems:
        raise InputError(f"the configuration cannot be written as a {target} plan: " + "; ".join(problems))
    return built


def fixed_constraints(cfg: Any) -> PlanConstraints:
    """Constraints that fix every dimension ``cfg`` sets (its recompute mode only when uniform)."""
    dims = {name: (getattr(cfg, name), getattr(cfg, name)) for name in ("tp", "pp", "cp", "dp", "ep", "vpp", "zero", "micro_batch")}
    recompute = cfg.recompute if cfg.layer_recompute is None else None
    return PlanConstraints(**dims, sp=cfg.sp, recompute=recompute, schedule=cfg.schedule)


def save_plan(plan: Plan, path: str | os.PathLike[str]) -> None:
    """Write ``plan.to_json()`` to ``path`` atomically: a temporary file beside it, then a rename, so
    that readers see the old file or the new one and a failure leaves nothing behind."""
    try:
        write_atomic(path, plan.to_json())
    except OSError as err:
        raise InputError(f"cannot write the plan {path}: {err.strerror}; check the path") from None
