"""Engine exports of a plan: Megatron-LM arguments, a torchtitan job config, a DeepSpeed config.

``export(plan, "megatron")`` returns the engine's export object; ``render`` gives the text
``meshplan export`` writes. Each exporter refuses what its engine cannot express with
:class:`UnsupportedPlanError` (an :class:`planner.errors.InputError`, CLI exit 2) naming the plan
field. The model is the plan's own layer list or preset unless given, and the plan is checked
as ``meshplan validate`` checks it before anything is exported.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal, Union

from planner.errors import InputError
from planner.plans.engines.common import TARGETS, UnsupportedPlanError, resolve_plan_model
from planner.plans.engines.engines import check_model_for, check_target, engine_export

if TYPE_CHECKING:
    from costmodel.specs import ModelSpec
    from planner.plans.engines.deepspeed import DeepSpeedExport
    from planner.plans.engines.megatron import MegatronExport
    from planner.plans.engines.torchtitan import TorchtitanExport
    from planner.plans.schema import Plan

    Export = Union[MegatronExport, TorchtitanExport, DeepSpeedExport]

__all__ = ["TARGETS", "UnsupportedPlanError", "check_model_for", "engine_export", "export", "render", "text_of"]

Format = Literal["native", "json"]
NATIVE = {"megatron": "bash launcher (argument arrays + torchrun)", "torchtitan": "Python config-registry module", "deepspeed": "config JSON"}
"""What ``--format native`` writes for each engine."""


def export(plan: Plan, target: str, model: ModelSpec | None = None) -> Export:
    """The export object of ``target`` for ``plan``, once the plan passes every check of ``meshplan
    validate`` (``planner.plans.load.check_plan``): an in-memory Plan that was edited into an invalid one
    is refused with :class:`InputError`, never exported. ``model`` defaults to the plan's own."""
    check_target(target)
    from planner.plans.load import check_plan

    spec = model if model is not None else resolve_plan_model(plan)
    check_plan(plan, spec)
    return engine_export(plan, target, spec)


def render(plan: Plan, target: str, fmt: Format = "native", model: ModelSpec | None = None) -> str:
    """Text of the export: the engine's own file form (``native``) or one JSON object (``json``,
    Megatron-LM's with the flat ``argv`` too); the plan is checked as by :func:`export`."""
    if fmt not in ("native", "json"):
        raise InputError(f"unknown export format {fmt!r:.40}; use native or json")
    return text_of(export(plan, target, model), target, fmt)


def text_of(result: Export, target: str, fmt: Format = "native") -> str:
    """The text form of an export object (see :func:`render`)."""
    if fmt == "json":
        data = result.model_dump()
        if target == "megatron":
            data["argv"] = result.argv()  # type: ignore[union-attr]
        return json.dumps(data, indent=2) + "\n"
    if target == "megatron":
        return result.shell()  # type: ignore[union-attr]
    if target == "torchtitan":
        return result.python()  # type: ignore[union-attr]
    return result.json()  # type: ignore[union-attr]
