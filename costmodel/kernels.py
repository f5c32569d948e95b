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


def matmul_time(cluster: ClusterSpec, m: float, n: float, k: float, count: float = 1) -> float:
    """Seconds for ``count`` GEMMs (m x k)(k x n) in bf16: the FLOP time of :func:`gemm_time` plus the
    time to stream A, B and C through HBM, added rather than overlapped (Calculon's ``no_overlap``
    op model, Isaev et al. SC'23). Thin GEMMs (small k or n, as TP makes them) lose most to it."""
    if m <= 0 or n <= 0 or k <= 0 or count <= 0:
        return 0.0
    nbytes = 2.0 * (m * k + k * n + m * n)
    traffic = nbytes / (cluster.gpu.hbm_bandwidth_gbps * 1e9 * cluster.efficiency.memory)
    return count * (gemm_time(cluster, 2.0 * m * n * k) + traffic)


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
