"""The decode all-reduce algorithms and each engine's choice (costmodel/serving/allreduce.py)."""

from __future__ import annotations

import pytest

from costmodel.serving.allreduce import (
    algorithms,
    choose,
    has_nvls,
    kernel_floor_us,
    nccl_ring,
    one_shot,
    two_shot,
)
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
    custom kernels two or three barriers; NVLS (TensorRT-LLM MultiShot) is the fastest."""
    size = 32 * 8192 * 2
    ring = nccl_ring(H200, 8, size)
    assert two_shot(H200, 8, size) < ring and two_shot(H200, 8, size) < 20e-6
    name, seconds = choose(H200, "trtllm", 8, size)
    assert name == "nvls" and seconds < 0.6 * ring


def test_vllm_switches_from_one_shot_to_two_shot_at_its_thresholds() -> None:
    assert choose(H200, "vllm", 8, 128 * KIB)[0] == "one-shot"
    assert choose(H200, "vllm", 8, 300 * KIB)[0] == "two-shot"
    assert choose(H200, "vllm", 4, 300 * KIB)[0] == "one-shot"
    assert choose(H200, "vllm", 2, 4 * 2**20)[0] == "one-shot"
    assert choose(H200, "vllm", 8, 16 * 2**20)[0] == "ring"


def test_trtllm_runs_the_fastest_it_has_and_nvls_only_behind_nvswitch() -> None:
    name, seconds = choose(H200, "trtllm", 8, 512 * KIB)
    assert seconds == min(algorithms(H200, "trtllm", 8, 512 * KIB).values())
    assert has_nvls(H200) and "nvls" in algorithms(H200, "trtllm", 8, 64 * 2**20)
    mi300x = resolve_cluster_arg("mi300x-8")
    assert not has_nvls(mi300x) and "nvls" not in algorithms(mi300x, "trtllm", 8, 64 * 2**20)


def test_latency_dominates_small_messages_and_bandwidth_large_ones() -> None:
    small, large = one_shot(H200, 8, 1 * KIB), one_shot(H200, 8, 64 * 2**20)
    assert small < 15e-6 and large > 1e-3
