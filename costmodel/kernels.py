"""Time of single kernels on one GPU: GEMMs with size-dependent efficiency, attention, memory-bound ops.

GEMM efficiency rises with size and saturates: η(F) = η_max · F / (F + F_½). Small GEMMs (TP shrinks
N or K by t, small micro-batches shrink M) lose to launch, tail and wave quantisation; large ones
approach the measured ceiling (Maximum Achievable Matmul FLOPS, stas00/ml-engineering
compute/accelerator/README.md). It is the smooth form of Calculon's size-tiered efficiency tables
(Isaev et al., SC'23, ``systems/*.json``: 0.95 ≥ 128 GFLOP ... 0.10 below 1 GFLOP). The closed form
``F/(peak·η(F)) = (F + F_½)/(peak·η_max)`` shows the physics: a fixed per-GEMM cost plus the ideal
time. Memory-bound kernels move bytes at η_mem of HBM bandwidth (Calculon's ``no_overlap`` op model).
"""

from __future__ import annotations

from costmodel.specs import ClusterSpec


def gemm_time(cluster: ClusterSpec, flops: float) -> float:
    """Seconds for one GEMM of ``flops`` FLOPs on one GPU (0 for an empty GEMM)."""
    if flops <= 0:
        return 0.0
    eff = cluster.efficiency
    half = eff.gemm_half_gflop * 1e9
    return (flops + half) / (cluster.gpu.peak_bf16_tflops * 1e12 * eff.gemm_max)


def grouped_gemm_time(cluster: ClusterSpec, flops_each: float, count: float) -> float:
    """Seconds for ``count`` equal GEMMs run back to back (MoE experts, batched heads)."""
    return count * gemm_time(cluster, flops_each) if count > 0 else 0.0


def attention_time(cluster: ClusterSpec, flops: float) -> float:
    """Seconds for a fused FlashAttention kernel executing ``flops`` FLOPs (Dao et al. 2022/2023)."""
    if flops <= 0:
        return 0.0
    eff = cluster.efficiency
    return flops / (cluster.gpu.peak_bf16_tflops * 1e12 * eff.attention) + eff.kernel_overhead_us * 1e-6


def memory_time(cluster: ClusterSpec, nbytes: float, kernels: int = 1) -> float:
    """Seconds to stream ``nbytes`` through HBM in ``kernels`` memory-bound kernels."""
    if nbytes <= 0:
        return 0.0
    eff = cluster.efficiency
    return nbytes / (cluster.gpu.hbm_bandwidth_gbps * 1e9 * eff.memory) + kernels * eff.kernel_overhead_us * 1e-6
