"""FP4 rates for serving (profiles/serving.json) and the GB300 / MI355X presets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import profiles
from profiles import load_cluster, load_gpu
from profiles.serving import (
    default_kv_dtype,
    fp4_experts_only,
    fp4_moe_only,
    kv_cache_unquantized,
    low_precision_rates,
    low_precision_sources,
)


@pytest.mark.parametrize(("gpu", "fp4", "mx"), [("b200", 9000, False), ("gb200", 10000, False), ("gb300", 15000, False),
                                               ("mi355x", 9200, True)])
def test_fp4_rates_are_twice_fp8_or_more_and_cited(gpu: str, fp4: float, mx: bool) -> None:
    spec = load_gpu(gpu)
    rates = low_precision_rates(spec)
    assert rates.peak_fp4_tflops == fp4 and rates.mx_blocks is mx
    assert rates.peak_fp4_tflops >= 2 * (spec.peak_fp8_tflops or 0)
    assert len(low_precision_sources(spec)["peak_fp4_tflops"]) > 20


def test_hopper_has_no_fp4() -> None:
    assert low_precision_rates(load_gpu("h100-sxm")).peak_fp4_tflops is None


def test_new_cluster_presets_load() -> None:
    assert load_cluster("gb300-nvl72").gpu.hbm_gib > 280
    assert load_cluster("mi355x-8").intra_node_bandwidth_gbps == pytest.approx(7 * 153.6 / 2)


@pytest.mark.parametrize("gpu", ["mi300x", "mi325x"])
def test_cdna3_has_no_fp4_cores_runs_rocm_and_streams_below_nvidia(gpu: str) -> None:
    """CDNA3 has no FP4 MFMA: FP4 weights are upcast in the ALUs at a cited rate; its HBM stream
    ceiling (81 %, Ambati et al. 2025) lies below the fractions fitted on NVIDIA runs."""
    rates = low_precision_rates(load_gpu(gpu))
    assert rates.peak_fp4_tflops is None and rates.platform == "rocm"
    assert rates.fp4_dequant_weights_per_s and rates.hbm_stream_fraction == pytest.approx(0.81)
    sources = low_precision_sources(load_gpu(gpu))
    assert "#970" in sources["fp4_dequant_weights_per_s"] and "Ambati" in sources["hbm_stream_fraction"]
    assert low_precision_rates(load_gpu("h100-sxm")).platform == "cuda"


def test_checkpoint_scopes_are_cited() -> None:
    """DeepSeek's NVFP4 checkpoint quantises the MoE layers alone, gpt-oss's MXFP4 the routed experts."""
    assert fp4_moe_only("deepseek-r1") and fp4_moe_only("deepseek-v3") and not fp4_moe_only("gpt-oss-120b")
    assert fp4_experts_only("gpt-oss-120b") and not fp4_experts_only("deepseek-r1")
    assert not fp4_moe_only("llama3.1-70b")


def test_kv_cache_unquantized_checkpoints_are_cited_and_scoped_to_their_precision() -> None:
    """DeepSeek's FP8 and gpt-oss's MXFP4 checkpoints state no KV quantisation, each flag with its
    source; NVIDIA's FP4 DeepSeek and any Llama checkpoint are not listed."""
    assert kv_cache_unquantized("deepseek-r1", "fp8") and kv_cache_unquantized("gpt-oss-120b", "fp4")
    assert not kv_cache_unquantized("deepseek-r1", "fp4") and not kv_cache_unquantized("llama3.1-70b", "fp8")
    checkpoints = json.loads((Path(profiles.__file__).parent / "serving.json").read_text())["checkpoints"]
    for name, entry in checkpoints.items():
        if "kv_cache_unquantized" in entry:
            assert len(str(entry["sources"]["kv_cache_unquantized"])) > 40, name


def test_default_kv_dtype_follows_the_engine_and_the_checkpoint() -> None:
    assert default_kv_dtype("deepseek-r1", "fp8", kv_auto_from_checkpoint=True) == "bf16"
    assert default_kv_dtype("deepseek-r1", "fp8", kv_auto_from_checkpoint=False) == "fp8"
    assert default_kv_dtype("llama3.1-70b", "bf16", kv_auto_from_checkpoint=False) == "bf16"
    assert default_kv_dtype("llama3.1-70b", "fp4", kv_auto_from_checkpoint=True) == "fp8"
