"""Serving-only hardware data: each GPU's FP4 tensor-core rate, its software platform and, where
FP4 weights are upcast in the GEMM, that upcast's rate (``serving.json``), which the training specs
do not carry."""

from __future__ import annotations

import json
from importlib import resources

from costmodel.serving.specs import LowPrecisionRates
from costmodel.specs import GPUSpec

SERVING_FILE = "serving.json"


def _file() -> dict[str, dict[str, dict[str, object]]]:
    text = resources.files(__package__).joinpath(SERVING_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def _table() -> dict[str, dict[str, object]]:
    return _file()["gpus"]


def _checkpoint_flag(model_name: str, flag: str) -> bool:
    entry = _file().get("checkpoints", {}).get(model_name)
    return bool(entry and entry.get(flag))


def fp4_experts_only(model_name: str) -> bool:
    """The model's published FP4 checkpoint quantises only its routed experts (serving.json
    ``checkpoints``; gpt-oss's MXFP4 experts)."""
    return _checkpoint_flag(model_name, "fp4_experts_only")


def fp4_moe_only(model_name: str) -> bool:
    """The model's published FP4 checkpoint quantises only its MoE layers' experts, routed and shared
    (serving.json ``checkpoints``; NVIDIA's DeepSeek-R1 FP4)."""
    return _checkpoint_flag(model_name, "fp4_moe_only")


def fp8_block_scaled(model_name: str) -> bool:
    """The model's published FP8 checkpoint scales 128 x 128 weight blocks and quantises activations
    per 1 x 128 group at run time (serving.json ``checkpoints``; DeepSeek-V3 / R1)."""
    return _checkpoint_flag(model_name, "fp8_block_scaled")


def low_precision_rates(gpu: GPUSpec) -> LowPrecisionRates:
    """The FP4 rate of ``gpu`` (matched by its gpus.json name); no FP4 where serving.json omits it."""
    entry = _table().get(gpu.name)
    if entry is None:
        return LowPrecisionRates()
    return LowPrecisionRates(peak_fp4_tflops=entry["peak_fp4_tflops"], mx_blocks=bool(entry["mx_blocks"]),
                             platform=entry.get("platform", "cuda"),
                             fp4_dequant_weights_per_s=entry.get("fp4_dequant_weights_per_s"),
                             hbm_stream_fraction=entry.get("hbm_stream_fraction"),
                             moe_stream_fraction=entry.get("moe_stream_fraction"),
                             moe_prefill_tflops=entry.get("moe_prefill_tflops"),
                             mla_decode_floor_us=entry.get("mla_decode_floor_us"))


def low_precision_sources(gpu: GPUSpec) -> dict[str, str]:
    """Citations of ``gpu``'s serving rates (empty where it has none)."""
    entry = _table().get(gpu.name)
    return dict(entry["sources"]) if entry else {}


def kv_cache_unquantized(model_name: str, precision: str) -> bool:
    """The model's published ``precision`` checkpoint states no KV-cache quantisation (serving.json
    ``checkpoints`` ``kv_cache_unquantized``: DeepSeek-V3 / R1's FP8, gpt-oss's MXFP4), so an engine
    whose KV dtype 'auto' follows the checkpoint keeps the cache bf16."""
    entry = _file().get("checkpoints", {}).get(model_name) or {}
    return precision in entry.get("kv_cache_unquantized", ())


def default_kv_dtype(model_name: str, precision: str, kv_auto_from_checkpoint: bool) -> str:
    """KV-cache dtype an engine runs when none is asked for: bf16 with bf16 weights; bf16 where the
    engine's 'auto' follows a checkpoint that states no KV quantisation
    (:func:`kv_cache_unquantized`); else FP8, as NVIDIA's ModelOpt FP8 / FP4 checkpoints carry FP8
    KV scales (``kv_cache_quant_algo`` FP8) and TensorRT-LLM's recipes run an FP8 cache."""
    if precision == "bf16" or (kv_auto_from_checkpoint and kv_cache_unquantized(model_name, precision)):
        return "bf16"
    return "fp8"
