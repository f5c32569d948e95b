"""Engine defaults per GPU: the Blackwell MoE path of vLLM (mxfp4.py backend) and SGLang (server_args.py)."""

from __future__ import annotations

from costmodel.serving.engines import DEFAULTS, on_gpu, recipe_kv_dtype


def test_moe_models_on_blackwell_run_tensorrt_llm_kernels() -> None:
    """On SM100 an MoE model runs TensorRT-LLM's fused MoE under vLLM and SGLang, and SGLang also fuses
    the all-reduce with the add and norm."""
    sglang = DEFAULTS["sglang"]
    blackwell = on_gpu(sglang, blackwell=True, moe_model=True)
    assert blackwell.fused_allreduce_norm and not sglang.fused_allreduce_norm
    assert blackwell.moe_extra_kernels == DEFAULTS["trtllm"].moe_extra_kernels < sglang.moe_extra_kernels
    assert on_gpu(sglang, blackwell=False, moe_model=True) == sglang
    assert on_gpu(sglang, blackwell=True, moe_model=False) == sglang
    vllm = on_gpu(DEFAULTS["vllm"], blackwell=True, moe_model=True)
    assert vllm.moe_extra_kernels == DEFAULTS["trtllm"].moe_extra_kernels and not vllm.fused_allreduce_norm
    assert vllm.trtllm_moe_tiles and blackwell.trtllm_moe_tiles and not DEFAULTS["vllm"].trtllm_moe_tiles



def test_tensorrt_llm_runs_mxfp4_experts_through_its_trtllm_moe_on_blackwell() -> None:
    """TensorRT-LLM's GPT-OSS deployment guide: on Blackwell the default MoE backend for MXFP4 experts is
    TRTLLM (trtllm-gen tiles); elsewhere, and for other checkpoints, its CUTLASS 16-row block stays."""
    trt = DEFAULTS["trtllm"]
    assert on_gpu(trt, blackwell=True, moe_model=True, mxfp4_experts=True).trtllm_moe_tiles
    assert on_gpu(trt, blackwell=True, moe_model=True) == trt
    assert on_gpu(trt, blackwell=False, moe_model=True, mxfp4_experts=True) == trt
    assert not trt.trtllm_moe_tiles


def test_vllm_follows_its_gpt_oss_blackwell_recipe() -> None:
    """vllm-project/recipes GPT-OSS_Blackwell.yaml: fuse_allreduce_rms and an FP8 KV cache, for MXFP4 experts on
    Blackwell only; no other engine's defaults take it."""
    vllm = DEFAULTS["vllm"]
    assert on_gpu(vllm, blackwell=True, moe_model=True, mxfp4_experts=True).flashinfer_allreduce_fusion
    assert not on_gpu(vllm, blackwell=False, moe_model=True, mxfp4_experts=True).flashinfer_allreduce_fusion
    assert not on_gpu(vllm, blackwell=True, moe_model=True).flashinfer_allreduce_fusion
    assert recipe_kv_dtype(vllm, True, True) == "fp8"
    assert recipe_kv_dtype(vllm, False, True) is None and recipe_kv_dtype(vllm, True, False) is None
    assert recipe_kv_dtype(DEFAULTS["sglang"], True, True) is None
    assert not any(on_gpu(DEFAULTS[e], True, True, True).flashinfer_allreduce_fusion for e in ("sglang", "trtllm"))
