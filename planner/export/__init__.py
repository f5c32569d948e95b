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
from planner.export.common import TARGETS, UnsupportedPlanError, resolve_plan_model

if TYPE_CHECKING:
    from costmodel.specs import ModelSpec
    from planner.export.deepspeed import DeepSpeedExport
    from planner.export.megatron import MegatronExport
    from planner.export.torchtitan import TorchtitanExport
    from planner.schema import Plan

    Export = Union[MegatronExport, TorchtitanExport, DeepSpeedExport]

__all__ = ["TARGETS", "UnsupportedPlanError", "check_model_for", "engine_export", "export", "render", "text_of"]

Format = Literal["native", "json"]
NATIVE = {"megatron": "bash launcher (argument arrays + torchrun)", "torchtitan": "Python config-registry module", "deepspeed": "config JSON"}
"""What ``--format native`` writes for each engine."""


def check_model_for(target: str, model: ModelSpec) -> None:
    """Refuse, before any search, a model ``target``'s launcher cannot build whatever the plan
    (Megatron-LM's ``pretrain_gpt.py`` and torchtitan's decoder: embedding, causal decoder blocks,
    final norm, output head); :class:`UnsupportedPlanError` names the layer."""
    if target == "megatron":
        from planner.export.megatron import check_model

        check_model(model)
    elif target == "torchtitan":
        from planner.export.common import check_decoder

        check_decoder(model, target, "torchtitan's decoder")


def export(plan: Plan, target: str, model: ModelSpec | None = None) -> Export:
    """The export object of ``target`` for ``plan``, once the plan passes every check of ``meshplan
    validate`` (``planner.plans.check_plan``): an in-memory Plan that was edited into an invalid one
    is refused with :class:`InputError`, never exported. ``model`` defaults to the plan's own."""
    _check_target(target)
    from planner.plans import check_plan

    spec = model if model is not None else resolve_plan_model(plan)
    check_plan(plan, spec)
    return engine_export(plan, target, spec)


def engine_export(plan: Plan, target: str, model: ModelSpec) -> Export:
    """The exporter of ``target`` alone, on a plan already checked (the validator's last check
    calls it: :func:`export` is the entry point)."""
    _check_target(target)
    if target == "megatron":
        from planner.export.megatron import megatron_export

        return megatron_export(plan, model)
    if target == "torchtitan":
        from planner.export.torchtitan import torchtitan_export

        return torchtitan_export(plan, model)
    from planner.export.deepspeed import deepspeed_export

    return deepspeed_export(plan, model)


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise InputError(f"unknown export target {target!r:.40}; use megatron, torchtitan or deepspeed")


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
