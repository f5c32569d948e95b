"""Everything one report shows, collected once for both renderers."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.specs import ModelSpec
from planner.errors import InputError
from planner.outputs.report.whatif import WhatIf, unavailable, what_if
from planner.plans.schema import Plan

LANGUAGE = {"megatron": "bash", "torchtitan": "python", "deepspeed": "json"}


@dataclass(frozen=True)
class Fragment:
    """One engine's launcher fragment, or why the engine cannot run the plan."""

    target: str
    language: str
    text: str | None
    refused: str | None
    code: str | None = None
    """Code-side settings (DeepSpeed's PipelineModule) as Python."""


@dataclass(frozen=True)
class ReportData:
    """The plan with its re-estimates and exports."""

    plan: Plan
    whatif: WhatIf
    fragments: list[Fragment]

    @property
    def title(self) -> str:
        p = self.plan
        return f"meshplan report: {p.model.name} on {p.request.gpus} x {p.cluster.gpu.name} ({p.cluster.name})"


def collect(plan: Plan, model: ModelSpec | None = None, reestimate: bool = True) -> ReportData:
    """Gather the report's data; the model is rebuilt from the plan unless given. Without the model
    (a moved config file, say) the re-estimates and fragments say why they are missing."""
    from planner.plans.engines.common import resolve_plan_model

    reason = ""
    if model is None:
        try:
            model = resolve_plan_model(plan)
        except InputError as err:
            reason = f"the model could not be rebuilt from {plan.model.arg!r}: {err}"
    if model is None:
        extras = unavailable(reason)
    elif reestimate:
        extras = what_if(plan, model)
    else:
        extras = unavailable("re-estimates were turned off")
    return ReportData(plan=plan, whatif=extras, fragments=fragments(plan, model, reason))


def fragments(plan: Plan, model: ModelSpec | None, reason: str) -> list[Fragment]:
    """Every engine's fragment, the plan's target first."""
    from planner.outputs.export import TARGETS, export, render

    order = sorted(TARGETS, key=lambda t: (t != plan.request.target, TARGETS.index(t)))
    out = []
    for target in order:
        if model is None:
            out.append(Fragment(target, LANGUAGE[target], None, reason))
            continue
        try:
            text = render(plan, target, "native", model)
        except InputError as err:
            out.append(Fragment(target, LANGUAGE[target], None, str(err)))
            continue
        code = export(plan, target, model).python() if target == "deepspeed" else None  # type: ignore[union-attr]
        out.append(Fragment(target, LANGUAGE[target], text, None, code))
    return out
