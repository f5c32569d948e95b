"""The packaged data (profiles/gpus.json, profiles/clusters.json) against the published numbers it cites.

Expected values are transcribed from /work/shared/reference/costmodel-notes.md (sections named per
table) and the sources quoted in the presets; a changed number in the JSON files must change here too.
"""

from __future__ import annotations

import pytest

from costmodel.specs import ClusterSpec, EfficiencySpec, GPUSpec
from profiles import cluster_for_gpu, cluster_sources, gpu_sources, list_clusters, list_gpus, load_cluster, load_gpu

# costmodel-notes.md 3.1: dense BF16/FP16 TFLOP/s, vendor memory "GB", memory bandwidth GB/s.
NOTES_3_1 = {
    "v100-sxm2-32gb": (125, 32, 900),
    "a100-40gb": (312, 40, 1555),
    "a100-80gb": (312, 80, 2039),
    "h100-sxm": (989, 80, 3350),
    "h200": (989, 141, 4800),
    "h800": (989, 80, 3350),
    "b200": (2250, 180, 8000),
    "gb200": (2500, 186, 8000),
    "mi300x": (1307.4, 192, 5300),
    "mi325x": (1307.4, 256, 6000),
    # Serving presets (issue 23): vendor datasheets, not in notes 3.1 (MI355X's peak from notes 3.2).
    "gb300": (2500, 288, 8000),
    "mi355x": (2300, 288, 8000),
}
# costmodel-notes.md 3.2: BF16 Maximum Achievable Matmul FLOPS (stas00/ml-engineering), TFLOP/s.
# Profiles store what a training loop gets of it: MAMF x TRAINING_LOOP (bench/calibrate.py).
MAMF_TFLOPS = {
    "a100-80gb": 271.2,
    "a100-40gb": 271.2,
    "h100-sxm": 794.5,
    "b200": 1745.0,
    "gb200": 1822.0,
    "mi300x": 668.4,
    "mi325x": 784.9,
}
# FlashAttention ceilings, TFLOP/s at head dim 128, causal, 2k tokens: FlashAttention-2 on A100
# (Dao, ICLR 2024: 50-73 % of peak, the low end), cuDNN on H100 (Shah et al., FlashAttention-3, 2024).
FLASH_TFLOPS = {"a100-80gb": 0.50 * 312, "a100-40gb": 0.50 * 312, "h100-sxm": 484.0, "h200": 484.0}
TRAINING_LOOP = 0.76
"""Fraction of the measured kernel ceilings a training loop reaches, one value for every GPU, fitted by
bench/calibrate.py on shared/reference/published_runs.csv."""
GEMM_FIXED_US = 4.0
"""A GEMM kernel's fixed time (bench/calibrate.py half_gflop; Calculon's tiers, notes 1.3)."""
# costmodel-notes.md 3.2: measured large-message collective bandwidth inside one node, GB/s
# (hgx-h800: DeepEP's "~160 GB/s NVLink maximum").
MEASURED_INTRA_GBPS = {"dgx-a100": 234.9, "dgx-h200": 367.6, "dgx-b200": 682.0, "mi300x-8": 312.9, "hgx-h800": 160.0}
# Vendor bidirectional per-GPU link rate (notes 3.1; Shoeybi et al. for DGX-2H) -> unidirectional = half.
BIDIRECTIONAL_LINK_GBPS = {
    "dgx-a100": 600, "dgx-h100": 900, "dgx-h200": 900, "dgx-b200": 1800, "gb200-nvl72": 1800,
    "mi300x-8": 896, "dgx-2h": 300,
}
# Per-node NIC rate in Gb/s and GPUs sharing it (notes 3.1; Narayanan et al.; llm-foundry; Shoeybi et al.).
NODE_NETWORK_GBITS = {
    "dgx-a100": (8 * 200, 8), "a100-roce": (1600, 8), "a100-40gb-roce": (1600, 8), "dgx-h100": (8 * 400, 8),
    "dgx-b200": (8 * 400, 8), "gb200-nvl72": (72 * 400, 72), "dgx-2h": (800, 16),
}
BRIEF_CLUSTERS = {
    "dgx-a100", "dgx-a100-40gb", "dgx-h100", "dgx-h200", "dgx-b200", "mi300x-8", "dgx-2h", "gb200-nvl72",
    "a100-roce", "a100-40gb-roce",
}


def test_the_gpu_set_is_the_one_in_the_notes_table() -> None:
    assert [gpu.name for gpu in list_gpus()] == list(NOTES_3_1)


@pytest.mark.parametrize("name", list(NOTES_3_1))
def test_gpu_peak_and_bandwidth_match_notes_3_1(name: str) -> None:
    peak, _, bandwidth = NOTES_3_1[name]
    gpu = load_gpu(name)
    assert gpu.peak_bf16_tflops == peak
    assert gpu.hbm_bandwidth_gbps == bandwidth


@pytest.mark.parametrize("name", list(NOTES_3_1))
def test_gpu_memory_is_the_vendor_capacity_less_what_the_driver_keeps(name: str) -> None:
    """Vendor HBM 'GB' is binary on these parts; PyTorch sees 98-100 % of it (e.g. 79.21 of 80 on H100)."""
    vendor_gb = NOTES_3_1[name][1]
    assert 0.98 * vendor_gb <= load_gpu(name).hbm_gib <= vendor_gb


@pytest.mark.parametrize("name", list(MAMF_TFLOPS))
def test_gemm_max_is_the_measured_mamf_times_the_training_loop_factor(name: str) -> None:
    gpu = load_gpu(name)
    efficiency = cluster_for_gpu(name).efficiency
    assert efficiency.gemm_max * gpu.peak_bf16_tflops == pytest.approx(MAMF_TFLOPS[name] * TRAINING_LOOP, rel=0.005)


@pytest.mark.parametrize("name", list(FLASH_TFLOPS))
def test_attention_is_the_measured_flash_ceiling_times_the_training_loop_factor(name: str) -> None:
    gpu = load_gpu(name)
    efficiency = cluster_for_gpu(name).efficiency
    assert efficiency.attention * gpu.peak_bf16_tflops == pytest.approx(FLASH_TFLOPS[name] * TRAINING_LOOP, rel=0.005)


@pytest.mark.parametrize("name", list(NOTES_3_1))
def test_gemm_half_size_is_the_fixed_kernel_time_at_the_gpu_gemm_rate(name: str) -> None:
    gpu = load_gpu(name)
    efficiency = cluster_for_gpu(name).efficiency
    rate_gflops = gpu.peak_bf16_tflops * 1e3 * efficiency.gemm_max
    assert efficiency.gemm_half_gflop == pytest.approx(GEMM_FIXED_US * 1e-6 * rate_gflops, rel=0.01)


def test_one_training_loop_factor_for_every_gpu() -> None:
    """No GPU gets its own fit: every GEMM ceiling is its MAMF fraction times the same factor."""
    factors = {name: cluster_for_gpu(name).efficiency.gemm_max * load_gpu(name).peak_bf16_tflops / tflops for name, tflops in MAMF_TFLOPS.items()}
    assert max(factors.values()) - min(factors.values()) < 0.005


@pytest.mark.parametrize("cluster", list(MEASURED_INTRA_GBPS))
def test_intra_node_efficiency_times_link_is_the_measured_busbw(cluster: str) -> None:
    spec = load_cluster(cluster)
    achieved = spec.efficiency.intra_node * spec.intra_node_bandwidth_gbps
    assert achieved == pytest.approx(MEASURED_INTRA_GBPS[cluster], rel=0.02)


@pytest.mark.parametrize("cluster", list(BIDIRECTIONAL_LINK_GBPS))
def test_intra_node_bandwidth_is_half_the_vendor_bidirectional_rate(cluster: str) -> None:
    assert load_cluster(cluster).intra_node_bandwidth_gbps == BIDIRECTIONAL_LINK_GBPS[cluster] / 2


@pytest.mark.parametrize("cluster", list(NODE_NETWORK_GBITS))
def test_network_bandwidth_is_the_node_nic_rate_shared_by_its_gpus(cluster: str) -> None:
    node_gbits, gpus = NODE_NETWORK_GBITS[cluster]
    spec = load_cluster(cluster)
    assert spec.gpus_per_node == gpus
    assert spec.network_bandwidth_gbps == pytest.approx(node_gbits / 8 / gpus)


def test_presets_cover_the_brief_and_one_node_per_gpu() -> None:
    names = {cluster.name for cluster in list_clusters()}
    assert BRIEF_CLUSTERS <= names
    assert {cluster_for_gpu(gpu.name).name for gpu in list_gpus()} <= names


@pytest.mark.parametrize("gpu", list(NOTES_3_1))
def test_default_cluster_is_built_on_that_gpu(gpu: str) -> None:
    assert cluster_for_gpu(gpu).gpu == load_gpu(gpu)


def test_selene_and_dgx_2h_presets_match_their_papers() -> None:
    selene = load_cluster("dgx-a100")
    assert (selene.gpu.name, selene.gpus_per_node) == ("a100-80gb", 8)
    dgx2h = load_cluster("dgx-2h")
    assert (dgx2h.gpu.name, dgx2h.gpus_per_node, dgx2h.network_bandwidth_gbps) == ("v100-sxm2-32gb", 16, 6.25)
    assert load_cluster("gb200-nvl72").gpus_per_node == 72


@pytest.mark.parametrize("cluster", [c.name for c in list_clusters()])
def test_efficiencies_are_ordered_sensibly(cluster: str) -> None:
    efficiency = load_cluster(cluster).efficiency
    assert efficiency.attention <= efficiency.gemm_max
    assert 0.5 <= efficiency.intra_node <= 0.9  # ring busbw stays below the wire rate (notes 3.2)
    assert 0.1 <= efficiency.overlap_slowdown <= 0.2  # Calculon 0.15, Lee et al. 18.9 % (notes 2.7)


def _cited_fields(model: type[GPUSpec] | type[ClusterSpec] | type[EfficiencySpec]) -> set[str]:
    """Fields holding numbers (names, sources and nested specs are not numbers to cite)."""
    return set(model.model_fields) - {"name", "source", "gpu", "efficiency"}


@pytest.mark.parametrize("cluster", [c.name for c in list_clusters()])
def test_every_number_of_every_cluster_preset_has_a_source(cluster: str) -> None:
    expected = (
        {f"gpu.{field}" for field in _cited_fields(GPUSpec)}
        | _cited_fields(ClusterSpec)
        | {f"efficiency.{field}" for field in EfficiencySpec.model_fields}
    )
    sources = cluster_sources(cluster)
    assert set(sources) == expected
    assert all(len(text) > 20 for text in sources.values())


@pytest.mark.parametrize("gpu", list(NOTES_3_1))
def test_every_number_of_every_gpu_has_a_source(gpu: str) -> None:
    sources = gpu_sources(gpu)
    numbers = {key for key in sources if not key.startswith("efficiency.")}
    assert numbers == _cited_fields(GPUSpec)
    assert all(len(text) > 20 for text in sources.values())
    assert load_gpu(gpu).source
