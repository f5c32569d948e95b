"""The decode all-reduce algorithms and each engine's choice (costmodel/serving/allreduce.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from costmodel.serving.allreduce import (
    algorithms,
    choose,
    fi_fusion_sizes,
    fuses_add_norm,
    kernel_floor_us,
    lamport_one_shot,
    lamport_two_shot,
    nccl_ring,
    one_shot,
    two_shot,
)
from costmodel.serving.engines import DEFAULTS
from planner.intake.arguments import resolve_cluster_arg

H200 = resolve_cluster_arg("dgx-h200")
KIB = 1024


def test_one_shot_reads_every_peers_buffer() -> None:
    """(n − 1)·S over 450 GB/s x 0.82 plus one kernel (5 µs less the 0.4 µs a graph saves) and two
    barriers, each a 2 x 1.9 µs NVLink round trip."""
    assert kernel_floor_us(H200) == pytest.approx(4.6)
    expected = (4.6 + 2 * 2 * 1.9) * 1e-6 + 7 * 64 * KIB / (450e9 * 0.82)
    assert one_shot(H200, 8, 64 * KIB) == pytest.approx(expected)


def test_custom_kernels_beat_the_ring_for_a_decode_sized_message() -> None:
    """32 tokens x 8192 x 2 B = 512 KiB: the ring pays 2(n − 1) hops (NCCL tuning.cc latencies), the
    custom kernels two or three barriers."""
    size = 32 * 8192 * 2
    ring = nccl_ring(H200, 8, size)
    assert two_shot(H200, 8, size) < ring and two_shot(H200, 8, size) < 20e-6
    assert one_shot(H200, 8, size) < ring


def test_vllm_switches_from_one_shot_to_two_shot_at_its_thresholds() -> None:
    assert choose(H200, "vllm", 8, 128 * KIB)[0] == "one-shot"
    assert choose(H200, "vllm", 8, 300 * KIB)[0] == "two-shot"
    assert choose(H200, "vllm", 4, 300 * KIB)[0] == "one-shot"
    assert choose(H200, "vllm", 2, 4 * 2**20)[0] == "one-shot"
    assert choose(H200, "vllm", 8, 16 * 2**20)[0] == "ring"


def test_trtllm_follows_its_lookup_table() -> None:
    """customAllReduceUtils.h: on 8 Hopper GPUs 32 x 8192 runs one-shot and 64 x 8192 NCCL; on 8
    Blackwell GPUs 128 x 8192 one-shot, 256 x 8192 two-shot, 512 x 8192 NCCL; never NVLS."""
    b200 = resolve_cluster_arg("dgx-b200")
    assert choose(H200, "trtllm", 8, 32 * 8192 * 2)[0] == "one-shot"
    assert choose(H200, "trtllm", 8, 64 * 8192 * 2)[0] == "ring"
    assert choose(b200, "trtllm", 8, 128 * 8192 * 2)[0] == "one-shot"
    assert choose(b200, "trtllm", 8, 256 * 8192 * 2)[0] == "two-shot"
    assert choose(b200, "trtllm", 8, 512 * 8192 * 2)[0] == "ring"
    assert choose(H200, "trtllm", 2, 256 * 8192 * 2)[0] == "one-shot"
    assert choose(H200, "trtllm", 6, 300 * 8192 * 2)[0] == "two-shot"  # the TP 4 row
    assert all(set(algorithms(cluster, "trtllm", n, 2**20)) <= {"one-shot", "two-shot", "ring"}
               for cluster in (H200, b200) for n in (2, 4, 8))


def test_latency_dominates_small_messages_and_bandwidth_large_ones() -> None:
    small, large = one_shot(H200, 8, 1 * KIB), one_shot(H200, 8, 64 * 2**20)
    assert small < 15e-6 and large > 1e-3


B200 = resolve_cluster_arg("dgx-b200")


def test_lamport_one_shot_pays_one_hop_and_no_barriers() -> None:
    """The fused Lamport kernel: one kernel floor, one 1.9 µs NVLink hop, (n − 1)·S pushed to the peers; the
    custom one-shot pays two barriers of a round trip each on top."""
    expected = (4.6 + 1.9) * 1e-6 + 7 * 64 * KIB / (450e9 * 0.82)
    assert lamport_one_shot(H200, 8, 64 * KIB) == pytest.approx(expected)
    assert one_shot(H200, 8, 64 * KIB) - lamport_one_shot(H200, 8, 64 * KIB) == pytest.approx(3 * 1.9e-6)
    assert lamport_two_shot(H200, 8, 64 * KIB) > lamport_one_shot(H200, 8, 64 * KIB) - 7 * 64 * KIB / (450e9 * 0.82)


def test_vllm_fusion_follows_its_size_caps_per_gpu_generation() -> None:
    """vLLM's FI_ALLREDUCE_FUSION_MAX_SIZE_MB: 1 MiB on 8 Blackwell GPUs (one-shot all the way), 0.5 MiB on
    8 Hopper GPUs; 4 Blackwell GPUs run one-shot to 4 MiB, two-shot to 32 MiB; no fusion on 3 or 16 GPUs."""
    assert fi_fusion_sizes(B200, 8) == (2**20, 2**20)
    assert fi_fusion_sizes(H200, 8) == (2**19, 2**19)
    assert fi_fusion_sizes(B200, 3) is None and fi_fusion_sizes(B200, 16) is None
    assert choose(B200, "vllm", 8, 512 * KIB, fi_fusion=True)[0] == "fi-one-shot"
    assert choose(B200, "vllm", 8, 2 * 2**20, fi_fusion=True)[0] == "two-shot"
    assert choose(B200, "vllm", 4, 8 * 2**20, fi_fusion=True)[0] == "fi-two-shot"
    assert choose(H200, "vllm", 8, 768 * KIB, fi_fusion=True)[0] == "two-shot"
    assert choose(B200, "vllm", 8, 512 * KIB)[0] == "two-shot"  # the pass off: vLLM's custom kernels
    assert choose(B200, "trtllm", 8, 64 * KIB, fi_fusion=True)[0] == "one-shot"  # TensorRT-LLM keeps its table


def test_fused_all_reduce_drops_the_add_and_norm_kernels_only_where_it_runs() -> None:
    fused = replace(DEFAULTS["vllm"], flashinfer_allreduce_fusion=True)
    assert fuses_add_norm(B200, fused, 8, False, 2880, 32)
    assert not fuses_add_norm(B200, fused, 8, False, 2880, 1024)  # 5.6 MiB > the 1 MiB cap
    assert not fuses_add_norm(B200, fused, 1, False, 2880, 32)
    assert not fuses_add_norm(B200, fused, 8, True, 2880, 32)
    assert not fuses_add_norm(B200, DEFAULTS["vllm"], 8, False, 2880, 32)
    assert fuses_add_norm(B200, DEFAULTS["trtllm"], 8, False, 2880, 4096)
