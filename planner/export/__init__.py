"""Engine exports of a plan: Megatron-LM arguments, a torchtitan job config, a DeepSpeed config.

``export(plan, "megatron")`` returns the engine's export object; ``render`` gives the text
``meshplan export`` writes. Each exporter refuses what its engine cannot express with
:class:`UnsupportedPlanError` (an :class:`planner.errors.InputError`, CLI exit 2) naming the plan
field. The model is rebuilt from ``plan.model.arg`` unless given.
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

__all__ = ["TARGETS", "UnsupportedPlanError", "check_model_for", "export", "render"]

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
    """The export object of ``target`` for ``plan``."""
    if target not in TARGETS:
        raise InputError(f"unknown export target {target!r}; use megatron, torchtitan or deepspeed")
    spec = model if model is not None else resolve_plan_model(plan)
    if target == "megatron":
        from planner.export.megatron import megatron_export

        return megatron_export(plan, spec)
    if target == "torchtitan":
        from planner.export.torchtitan import torchtitan_export

        return torchtitan_export(plan, spec)
    from planner.export.deepspeed import deepspeed_export

    return deepspeed_export(plan, spec)


def render(plan: Plan, target: str, fmt: Format = "native", model: ModelSpec | None = None) -> str:
    """Text of the export: the engine's own file form (``native``) or one JSON object (``json``,
    Megatron-LM's with the flat ``argv`` too)."""
    result = export(plan, target, model)
    if fmt == "json":
        data = result.model_dump()
        if target == "megatron":
            data["argv"] = result.argv()  # type: ignore[union-attr]
        return json.dumps(data, indent=2) + "\n"
    if fmt != "native":
        raise InputError(f"unknown export format {fmt!r}; use native or json")
    if target == "megatron":
        return result.shell()  # type: ignore[union-attr]
    if target == "torchtitan":
        return result.python()  # type: ignore[union-attr]
    return result.json()  # type: ignore[union-attr]
