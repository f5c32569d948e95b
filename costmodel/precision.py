"""FP8 training as Transformer Engine and torchao run it: which GEMMs go FP8, how much faster they
are, what the scaling costs, and what stays in memory.

Transformer Engine (NVIDIA/TransformerEngine, ``te.Linear`` / ``LayerNormLinear`` under
``fp8_autocast``) and torchao ``Float8Linear`` (pytorch/ao, ``convert_to_float8_training``, the
torchtitan Float8 path) run the projections of each transformer block (QKV, attention output, MLP,
experts) as FP8 GEMMs; the attention core (bf16 FlashAttention / cuDNN: FP8 attention is opt-in,
``NVTE_FP8_DPA``), the router, the embedding and the output layer stay in bf16 (torchao's
``module_filter_fn`` in torchtitan skips ``output``; Megatron's output layer is not a TE module).
An FP8 GEMM reads one-byte operands and runs at the measured FP8 ceiling; each input activation and
each output gradient is first cast (and transposed for the other GEMM of backward) by a
memory-bound kernel. On Blackwell (``GPUSpec.mxfp8``) the recipe is MXFP8: one E8M0 scale per 32
elements, computed inside the cast, in both orientations.
"""

from __future__ import annotations

from costmodel.specs import ClusterSpec

CAST_BYTES_PER_ELEMENT = 4.0
"""Cast-and-transpose of a bf16 tensor to FP8 (Transformer Engine ``cast_transpose``): read 2 bytes,
write the row-wise and the column-wise FP8 copies (1 + 1)."""
AMAX_BYTES_PER_ELEMENT = 2.0
"""Dynamic (current) scaling reads the bf16 tensor once more for its amax before the cast (torchao
tensorwise); delayed scaling folds the amax into the cast, and a compiled graph folds it into the
producing kernel."""
MX_SCALE_BYTES_PER_ELEMENT = 2.0 / 32.0
"""MXFP8 writes one one-byte E8M0 scale per 32 elements in each of the two orientations (OCP
Microscaling Formats MX v1.0 spec, block size 32)."""
FP8_WEIGHT_COPY_BYTES = 2.0
"""Transformer Engine keeps an FP8 copy of each FP8 GEMM's weight and its transpose between
micro-batches (``is_first_microbatch`` caching): 1 + 1 bytes per parameter."""


def fp8_gemm_speedup(cluster: ClusterSpec) -> float:
    """FP8 over BF16 GEMM throughput at the measured ceilings: (FP8 peak x FP8 MAMF fraction) /
    (BF16 peak x BF16 MAMF fraction) (stas00/ml-engineering compute/accelerator/README.md; H100 SXM
    1402.6 / 794.5 = 1.77, B200 3432.5 / 1745.0 = 1.97). Raises ValueError for a GPU without FP8."""
    gpu = cluster.gpu
    if gpu.peak_fp8_tflops is None:
        raise ValueError(f"GPU {gpu.name} has no FP8 tensor cores (peak_fp8_tflops is not set)")
    fp8 = gpu.peak_fp8_tflops * (gpu.fp8_mamf_fraction or 1.0)
    bf16 = gpu.peak_bf16_tflops * (gpu.bf16_mamf_fraction or 1.0)
    return fp8 / bf16


def cast_bytes_per_element(cluster: ClusterSpec, dynamic: bool, fused: bool) -> float:
    """HBM bytes to quantise one bf16 element for an FP8 GEMM (both orientations): the cast, plus
    the amax pass of dynamic scaling when nothing fuses it, plus MX block scales on Blackwell."""
    if cluster.gpu.mxfp8:
        return CAST_BYTES_PER_ELEMENT + MX_SCALE_BYTES_PER_ELEMENT
    return CAST_BYTES_PER_ELEMENT + (AMAX_BYTES_PER_ELEMENT if dynamic and not fused else 0.0)
