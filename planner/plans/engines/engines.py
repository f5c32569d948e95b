"""Each engine's exporter behind one call (:func:`engine_export`), and the models an engine's launcher
cannot build whatever the plan (:func:`check_model_for`). The validator's last check calls these on a
plan it has checked; ``planner.outputs.export.export`` is the entry point that checks first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from planner.errors import InputError
from planner.plans.engines.common import TARGETS, UnsupportedPlanError

if TYPE_CHECKING:
    from costmodel.specs import ModelSpec
    from planner.plans.engines.deepspeed import DeepSpeedExport
    from planner.plans.engines.megatron import MegatronExport
    from planner.plans.engines.torchtitan import TorchtitanExport
    from planner.plans.schema import Plan

    Export = Union[MegatronExport, TorchtitanExport, DeepSpeedExport]


def check_model_for(target: str, model: ModelSpec) -> None:
    """Refuse, before any search, a model ``target``'s launcher cannot build whatever the plan
    (Megatron-LM's ``pretrain_gpt.py`` and torchtitan's decoder: embedding, causal decoder blocks,
    final norm, output head); :class:`UnsupportedPlanError` names the layer."""
    if target == "megatron":
        from planner.plans.engines.megatron import check_model

        check_model(model)
    elif target == "torchtitan":
        from planner.plans.engines.common import check_decoder

        check_decoder(model, target, "torchtitan's decoder")


def engine_export(plan: Plan, target: str, model: ModelSpec) -> Export:
    """The exporter of ``target`` alone, on a plan already checked (the validator's last check
    calls it: :func:`export` is the entry point)."""
    check_target(target)
    if plan.hetero is not None:  # issue 22: no engine runs uneven shares or per-stage GPU types
        raise UnsupportedPlanError(target, "hetero.replicas", hetero_refusal(plan, target))
    if target == "megatron":
        from planner.plans.engines.megatron import megatron_export

        return megatron_export(plan, model)
    if target == "torchtitan":
        from planner.plans.engines.torchtitan import torchtitan_export

        return torchtitan_export(plan, model)
    from planner.plans.engines.deepspeed import deepspeed_export

    return deepspeed_export(plan, model)


def check_target(target: str) -> None:
    """:class:`InputError` unless ``target`` is an engine meshplan exports to."""
    if target not in TARGETS:
        raise InputError(f"unknown export target {target!r:.40}; use megatron, torchtitan or deepspeed")


def hetero_refusal(plan: Plan, target: str) -> str:
    """What a heterogeneous plan uses that no engine export can express (one clause)."""
    assert plan.hetero is not None
    what = []
    if len({r.micro_batches for r in plan.hetero.replicas}) > 1:
        what.append("uneven data-parallel shares (micro-batches per replica differ)")
    if len({s.gpu_cluster for r in plan.hetero.replicas for s in r.stages}) > 1:
        what.append("stages on different GPU types")
    if any(s.speed < 1.0 for r in plan.hetero.replicas for s in r.stages):
        what.append("GPUs planned at reduced speed")
    what = what or ["a GPU layout of the mixed or degraded cluster (device list per replica)"]
    return ("cannot express " + " and ".join(what) + f"; plan again with --target {target} (a uniform plan on healthy GPUs of one type)")
