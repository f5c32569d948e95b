"""Loading a plan as every command does: read it, check it as ``meshplan validate`` does, and
re-estimate it (``planner.load_plan``, ``planner.estimate_plan``)."""

from __future__ import annotations

from pathlib import Path

from costmodel.specs import ModelSpec
from planner.errors import InputError
from planner.estimation.result import EstimateResult, estimate_config
from planner.plans.files import read_plan
from planner.plans.named_model import plan_model
from planner.plans.plan_checks import plan_problems
from planner.plans.schema import Plan


def load_plan(path: str | Path, retrace: bool = False) -> Plan:
    """Read a plan file and check it as ``meshplan validate`` does (degrees, stages, recomputation,
    batch, cluster, memory, target): a plan that does not validate is refused with every problem
    in one :class:`InputError`, so nothing is estimated, reported or exported from it. ``retrace``
    rebuilds the model from ``model.arg`` (runs a factory: only for plans you trust)."""
    return load_plan_and_model(path, retrace)[0]


def load_plan_and_model(path: str | Path, retrace: bool = False) -> tuple[Plan, ModelSpec]:
    """:func:`load_plan`, with the model the plan was checked against."""
    plan = read_plan(path)
    model = plan_model(plan, retrace=True) if retrace else None
    check_plan(plan, model, f"plan {path}")
    return plan, model if model is not None else plan_model(plan)


def check_plan(plan: Plan, model: ModelSpec | None = None, what: str = "the plan") -> None:
    """Raise :class:`InputError` listing every problem of ``plan`` (``planner.plans.plan_checks``); without
    ``model``, the plan's own layer list or preset is used (:func:`plan_model`)."""
    if plan.hetero is not None:  # a mixed or degraded cluster: its own validator
        from planner.plans.hetero.checks import hetero_problems

        problems = hetero_problems(plan, model if model is not None else plan_model(plan))
    else:
        problems = plan_problems(plan, model)
    if problems:
        raise InputError(f"{what} is invalid: {problems[0]}", *problems[1:])


def estimate_plan(path: str | Path, retrace: bool = False) -> EstimateResult:
    """Re-estimate the exact configuration a plan records (reproduces the plan's own estimate),
    after checking the plan as :func:`load_plan` does."""
    plan, model = load_plan_and_model(path, retrace)
    if plan.hetero is not None:  # priced replica by replica, as the search did
        from planner.estimation.hetero_result import hetero_estimate_result, price_replicas
        from planner.plans.hetero.specs import specs_of

        cand = price_replicas(model, plan.hetero.cluster, plan.config, specs_of(plan.hetero))
        return hetero_estimate_result(model, plan.hetero.cluster, cand, list(plan.estimate.assumptions))
    return estimate_config(model, plan.cluster, plan.config, list(plan.estimate.assumptions))
