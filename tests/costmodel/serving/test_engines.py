"""Engine defaults per GPU: SGLang's Blackwell MoE path (server_args.py model-specific adjustments)."""

from __future__ import annotations

from costmodel.serving.engines import DEFAULTS, on_gpu


def test_sglang_serves_moe_models_on_blackwell_with_tensorrt_llm_fusions() -> None:
    """On SM100 an MoE model runs TensorRT-LLM's fused all-reduce + norm and fused MoE under SGLang."""
    sglang = DEFAULTS["sglang"]
    blackwell = on_gpu(sglang, blackwell=True, moe_model=True)
    assert blackwell.fused_allreduce_norm and not sglang.fused_allreduce_norm
    assert blackwell.moe_extra_kernels == DEFAULTS["trtllm"].moe_extra_kernels < sglang.moe_extra_kernels
    assert on_gpu(sglang, blackwell=False, moe_model=True) == sglang
    assert on_gpu(sglang, blackwell=True, moe_model=False) == sglang
    assert on_gpu(DEFAULTS["vllm"], blackwell=True, moe_model=True) == DEFAULTS["vllm"]

