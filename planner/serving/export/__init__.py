"""Serving plan exports: the launch commands of vLLM, SGLang and TensorRT-LLM."""

from __future__ import annotations

from planner.errors import InputError
from planner.serving.schema import ServingPlan

SERVING_TARGETS = ("vllm", "sglang", "trtllm")


def export_serving(plan: ServingPlan, target: str, gpus_per_node: int) -> str:
    """The launch script of ``plan`` for ``target``; InputError for an unknown target or a plan the
    engine cannot launch."""
    if target == "vllm":
        from planner.serving.export.vllm import export_vllm

        return export_vllm(plan, gpus_per_node)
    if target == "sglang":
        from planner.serving.export.sglang import export_sglang

        return export_sglang(plan, gpus_per_node)
    if target == "trtllm":
        from planner.serving.export.trtllm import export_trtllm

        return export_trtllm(plan, gpus_per_node)
    raise InputError(f"unknown serving export target {target!r}; choose {', '.join(SERVING_TARGETS)}")
