"""The serving request context: which engine kernels apply on which GPU."""

from __future__ import annotations

from costmodel.serving.engines import EngineDefaults
from planner.serving.request import context


def test_context_picks_the_blackwell_path_from_the_gpu_and_the_model() -> None:
    """B200 (MX tensor cores, CUDA) with DeepSeek-R1 takes the path; H200, or a dense model, does not."""
    def engine(model: str, cluster: str) -> EngineDefaults:
        return context(model=model, cluster=cluster, gpus=8, isl=1024, osl=1024, precision="fp8",
                       engine="sglang").hardware.engine
    assert engine("deepseek-r1", "dgx-b200").fused_allreduce_norm
    assert not engine("deepseek-r1", "dgx-h200").fused_allreduce_norm
    assert not engine("llama3.1-70b", "dgx-b200").fused_allreduce_norm


def test_default_kv_dtype_is_the_engines_auto_for_the_checkpoint() -> None:
    """vLLM / SGLang's 'auto' KV dtype keeps a checkpoint without KV quantisation (DeepSeek-R1 FP8,
    gpt-oss MXFP4) bf16; TensorRT-LLM, a ModelOpt FP8 Llama or a bf16 model keep their old default;
    an asked dtype always wins. vLLM's gpt-oss recipe for Blackwell sets an FP8 cache (GPT-OSS_Blackwell.yaml),
    its Hopper one none."""
    def kv(model: str, precision: str, engine: str, asked: str | None = None, cluster: str = "dgx-b200") -> str:
        return context(model=model, cluster=cluster, gpus=8, isl=1024, osl=1024, precision=precision,
                       kv_dtype=asked, engine=engine).kv_dtype
    assert kv("deepseek-r1", "fp8", "sglang") == "bf16" and kv("deepseek-r1", "fp8", "vllm") == "bf16"
    assert kv("gpt-oss-120b", "fp4", "vllm", cluster="dgx-h200") == "bf16"
    assert kv("gpt-oss-120b", "fp4", "vllm") == "fp8" and kv("gpt-oss-120b", "fp4", "sglang") == "bf16"
    assert kv("gpt-oss-120b", "fp4", "vllm", asked="bf16") == "bf16"
    assert kv("deepseek-r1", "fp8", "trtllm") == "fp8" and kv("deepseek-r1", "fp4", "sglang") == "fp8"
    assert kv("llama3.1-70b", "fp8", "vllm") == "fp8" and kv("llama3.1-70b", "bf16", "trtllm") == "bf16"
    assert kv("deepseek-r1", "fp8", "sglang", asked="fp8") == "fp8"


def test_vllm_fuses_the_all_reduce_with_the_norm_for_gpt_oss_on_blackwell_only() -> None:
    """vLLM's gpt-oss Blackwell recipe turns ``fuse_allreduce_rms`` on; its Hopper recipe, and other models, not."""
    def engine(model: str, cluster: str, precision: str = "fp4") -> EngineDefaults:
        return context(model=model, cluster=cluster, gpus=8, isl=1024, osl=1024, precision=precision,
                       engine="vllm").hardware.engine
    assert engine("gpt-oss-120b", "dgx-b200").flashinfer_allreduce_fusion
    assert not engine("gpt-oss-120b", "dgx-h200").flashinfer_allreduce_fusion
    assert not engine("llama3.1-70b", "dgx-b200", "fp8").flashinfer_allreduce_fusion
