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
