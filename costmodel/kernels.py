"""Time of single kernels on one GPU: GEMMs with size-dependent efficiency, attention, memory-bound ops.

GEMM efficiency rises with size and saturates: η(F) = η_max · F / (F + F_½). Small GEMMs (TP shrinks
N or K by t, small micro-batches shrink M) lose to launch, tail and wave quantisation; large ones
approach the measured ceiling (Maximum Achievable Matmul FLOPS, stas00/ml-engineering
compute/accelerator/README.md). It is the smooth form of Calculon's size-tiered efficiency tables
(Isaev et al., SC'23, ``systems/*.json``: 0.95 ≥ 128 GFLOP ... 0.10 below 1 GFLOP). The closed form
``F/(peak·η(F)) = (F + F_½)/(peak·η_max)`` shows the physics: a fixed per-GEMM cost plus the ideal
time, F_½ = t_0·peak·η_max for a fixed kernel time t_0 (profiles derive each GPU's F_½ from one t_0).
A GEMM takes the longer of that and its operand traffic (roofline); memory-bound kernels move bytes
at η_mem of HBM bandwidth.
"""

from __future__ import annotations

from costmodel.specs import ClusterSpec


POWER_CLOCK_EXPONENT = 1.0 / 3.0
"""Sustained clock over boost clock under a power cap: (cap / TDP)^(1/3). Dynamic power is C·V²·f
and, in the DVFS range, voltage scales with frequency, so power goes as f³ (Weste & Harris, "CMOS
VLSI Design", dynamic power; the cube law used for DVFS); a cluster that measured its sustained
clocks states ``sustained_clock_fraction`` instead. [derived]"""


def clock_fraction(cluster: ClusterSpec) -> float:
    """Fraction of the tensor-core peak a power-capped GPU sustains (1 without a cap)."""
    if cluster.sustained_clock_fraction is not None:
        return cluster.sustained_clock_fraction
    limit, tdp = cluster.power_limit_w, cluster.gpu.tdp_w
    if limit is None or tdp is None or limit >= tdp:
        return 1.0
    return (limit / tdp) ** POWER_CLOCK_EXPONENT


def gemm_time(cluster: ClusterSpec, flops: float, speedup: float = 1.0) -> float:
    """Seconds for one GEMM of ``flops`` FLOPs on one GPU (0 for an empty GEMM); ``speedup`` is the
    FP8 over BF16 rate of an FP8 GEMM (``costmodel.precision``), which leaves the fixed cost alone."""
    if flops <= 0:
        return 0.0
    eff = cluster.efficiency
    half = eff.gemm_half_gflop * 1e9
    return (flops / speedup + half) / (cluster.gpu.peak_bf16_tflops * 1e12 * eff.gemm_max * clock_fraction(cluster))


def matmul_time(cluster: ClusterSpec, m: float, n: float, k: float, count: float = 1, speedup: float = 1.0) -> float:
    """Seconds for ``count`` GEMMs (m x k)(k x n) in bf16, run as one (batched) kernel: the roofline
    of :func:`gemm_time` on all their FLOPs and the time to stream A, B and C through HBM, whichever
    is longer (Williams, Waterman & Patterson, "Roofline", CACM 2009; Calculon's ``roofline`` op
    model, Isaev et al. SC'23). A tiled GEMM overlaps its operand loads with its math, so the two do
    not add; thin GEMMs (small k, as eager attention's QKᵀ with k = head_dim) are the memory-bound
    ones. One kernel pays the size penalty once (a batched ``bmm`` over heads, a grouped expert GEMM)."""
    if m <= 0 or n <= 0 or k <= 0 or count <= 0:
        return 0.0
    operand = 1.0 if speedup > 1.0 else 2.0
    nbytes = count * (operand * (m * k + k * n) + 2.0 * m * n)
    traffic = nbytes / (cluster.gpu.hbm_bandwidth_gbps * 1e9 * cluster.efficiency.memory)
    return max(gemm_time(cluster, 2.0 * m * n * k * count, speedup), traffic)


FLASH_REFERENCE_HEAD_DIM = 128
"""Head dimension at which ``EfficiencySpec.attention`` is stated (the published kernel benchmarks)."""
FLASH_REFERENCE_CONTEXT = 1024.0
"""Average keys per query at which ``EfficiencySpec.attention`` is stated: causal attention over 2k
tokens (Shah et al., "FlashAttention-3", 2024, H100 forward benchmarks at 2k)."""
FLASH_BLOCK = 128
"""Keys per KV tile of FlashAttention's inner loop (Dao 2023, FlashAttention-2 Alg. 1; 128 x 128
tiles on Hopper and Ampere for head dim 128)."""
FA2_ON_HOPPER = 298.0 / 484.0
"""FlashAttention-2 over the Hopper-native kernels (cuDNN, FlashAttention-3) that the calibrated
ceiling states: 298 against 484 TFLOP/s, H100 forward, head dim 128, 2k tokens (Shah et al. 2024).
PyTorch's SDPA flash backend is FlashAttention-2; on Ampere it is the calibrated ceiling itself."""
FA2_GPUS = ("h100", "h200", "h800", "gh200", "b200", "gb200")
"""GPUs whose calibrated attention ceiling is a kernel FlashAttention-2 does not match (Hopper's
wgmma/TMA kernels; Blackwell assumed alike: FlashAttention-2 uses neither generation's new
instructions) [assumption for Blackwell]."""


def tile_efficiency(context: float, causal: bool) -> float:
    """Share of a FlashAttention kernel's tile work that is useful for queries attending to
    ``context`` keys on average: each 128-row query block runs context/128 KV tiles, one more tile's
    worth of prologue and epilogue (load Q, rescale and write O and the log-sum-exp), and under a
    causal mask half a tile of masked work on the diagonal (Dao 2023, FlashAttention-2 Alg. 1 and
    §3.1.1 causal masking) [derived]. Longer contexts amortise the fixed work: 0.84 at 2k causal,
    0.96 at 8k, 0.99 at 32k."""
    tiles = max(context, 1.0) / FLASH_BLOCK
    return tiles / (tiles + 1.0 + (0.5 if causal else 0.0))


def attention_time(cluster: ClusterSpec, flops: float, head_dim: int = FLASH_REFERENCE_HEAD_DIM,
                   context: float = FLASH_REFERENCE_CONTEXT, causal: bool = True, fa2: bool = False) -> float:
    """Seconds for a fused FlashAttention kernel executing ``flops`` FLOPs (Dao et al. 2022/2023).

    Narrower heads run each tile's two matmuls with a shorter inner dimension against the same softmax
    work: below head dim 128 the efficiency scales as sqrt(head_dim / 128). Shah et al.,
    "FlashAttention-3" (2024), H100 forward at 2k tokens, head dim 64 over 128: FlashAttention-3 0.74,
    cuDNN 0.64, FlashAttention-2 0.88; sqrt(64/128) = 0.71 sits among them. The sequence length
    enters through :func:`tile_efficiency` relative to the calibrated 2k causal point; ``fa2`` runs
    FlashAttention-2 (PyTorch SDPA's flash backend), :data:`FA2_ON_HOPPER` of the ceiling on
    :data:`FA2_GPUS`."""
    if flops <= 0:
        return 0.0
    eff = cluster.efficiency
    narrow = min(1.0, (head_dim / FLASH_REFERENCE_HEAD_DIM) ** 0.5)
    length = tile_efficiency(context, causal) / tile_efficiency(FLASH_REFERENCE_CONTEXT, True)
    kernel = FA2_ON_HOPPER if fa2 and cluster.gpu.name.startswith(FA2_GPUS) else 1.0
    rate = cluster.gpu.peak_bf16_tflops * 1e12 * eff.attention * narrow * length * kernel * clock_fraction(cluster)
    return flops / rate + eff.kernel_overhead_us * 1e-6


def memory_time(cluster: ClusterSpec, nbytes: float, kernels: int = 1) -> float:
    """Seconds to stream ``nbytes`` through HBM in ``kernels`` memory-bound kernels."""
    if nbytes <= 0:
        return 0.0
    eff = cluster.efficiency
    return nbytes / (cluster.gpu.hbm_bandwidth_gbps * 1e9 * eff.memory) + kernels * eff.kernel_overhead_us * 1e-6
