"""Plain inputs of the serving cost model: number formats, one serving instance's parallelism, the
low-precision tensor-core rates, and the handful of efficiency constants fitted on published runs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_FROZEN = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

WeightPrecision = Literal["bf16", "fp8", "fp4"]
"""Format of the transformer blocks' linear weights (and their GEMMs)."""
KvDtype = Literal["bf16", "fp8"]
"""Format of the stored keys and values."""

NVFP4_BYTES_PER_PARAM = 0.5 + 1.0 / 16.0
"""NVFP4: 4-bit E2M1 elements plus one FP8 E4M3 scale per 16 elements (NVIDIA, "Introducing NVFP4
for Efficient and Accurate Low-Precision Inference", developer blog, 2025)."""
MXFP4_BYTES_PER_PARAM = 0.5 + 1.0 / 32.0
"""MXFP4: 4-bit E2M1 elements plus one E8M0 scale per 32 (OCP Microscaling Formats MX v1.0 spec)."""


def weight_bytes(precision: WeightPrecision, mx_blocks: bool = False) -> float:
    """Bytes per weight in ``precision``: 2 (bf16), 1 (fp8), NVFP4 or MXFP4 with their block scales
    (``mx_blocks``: AMD's MXFP4 rather than NVIDIA's NVFP4)."""
    if precision == "bf16":
        return 2.0
    if precision == "fp8":
        return 1.0
    return MXFP4_BYTES_PER_PARAM if mx_blocks else NVFP4_BYTES_PER_PARAM


def kv_bytes(dtype: KvDtype) -> float:
    """Bytes per stored key or value element (bf16 2, fp8 1)."""
    return 2.0 if dtype == "bf16" else 1.0


class Instance(BaseModel):
    """One serving engine instance: how its GPUs split the model (vLLM / SGLang / TRT-LLM flags
    ``--tensor-parallel-size``, ``--pipeline-parallel-size``, expert parallelism, attention DP)."""

    model_config = _FROZEN
    tp: int = Field(default=1, gt=0)
    """GPUs sharing every layer (TensorRT-LLM ``tp_size``; with ``attention_dp`` the attention runs
    data-parallel over these GPUs and only the MLP / experts are split)."""
    pp: int = Field(default=1, gt=0)
    """Pipeline stages, each holding 1/pp of the layers."""
    ep: int = Field(default=1, gt=0)
    """Expert-parallel degree inside the tp GPUs (TensorRT-LLM ``moe_expert_parallel_size``; the
    experts' remaining split tp / ep is tensor-parallel)."""
    attention_dp: bool = False
    """Attention data parallelism (TensorRT-LLM ``enable_attention_dp``, SGLang ``--enable-dp-attention``):
    each of the tp GPUs runs its own requests' attention with the whole KV heads."""

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @model_validator(mode="after")
    def _ep_divides_tp(self) -> "Instance":
        if self.tp % self.ep:
            raise ValueError(f"ep {self.ep} must divide tp {self.tp} (experts split ep-ways inside the tp GPUs)")
        return self


class LowPrecisionRates(BaseModel):
    """Dense FP4 tensor-core rate of a GPU, which ``costmodel.specs.GPUSpec`` does not carry (the
    FP8 rate and MAMF fractions come from the GPUSpec)."""

    model_config = _FROZEN
    peak_fp4_tflops: float | None = Field(default=None, gt=0)
    """Dense FP4 (NVFP4 / MXFP4) peak, TFLOP/s; None where the GPU has no FP4 tensor cores."""
    mx_blocks: bool = False
    """FP4 weights use MXFP4 (32-element E8M0 scales, AMD CDNA4) rather than NVFP4."""
    platform: Literal["cuda", "rocm"] = "cuda"
    """The GPU's software stack: TensorRT-LLM runs on CUDA only (NVIDIA TensorRT-LLM docs)."""
    hbm_stream_fraction: float | None = Field(default=None, gt=0, le=1)
    """Measured ceiling of a streaming kernel's HBM bandwidth over the peak where it lies below the
    fitted ``ServingEfficiency`` fractions (those come from NVIDIA runs); None: no lower ceiling."""
    moe_stream_fraction: float | None = Field(default=None, gt=0, le=1)
    """Measured HBM rate of the engine's fused MoE kernel streaming a decode step's routed-expert
    weights, over the HBM peak, where it lies below the streaming ceiling (AMD aiter's block-scaled
    FP8 two-stage MoE, :func:`costmodel.serving.step.expert_bandwidth`); None: the dense rate."""
    moe_prefill_tflops: float | None = Field(default=None, gt=0)
    """Measured rate of the engine's fused MoE on a prefill chunk's routed experts, TFLOP/s, where it
    lies below the modelled GEMM rate (:func:`costmodel.serving.moe.fused_moe_prefill_seconds`);
    None: the modelled rate."""
    mla_decode_floor_us: float | None = Field(default=None, gt=0)
    """Measured time of the engine's MLA decode attention call on this GPU at one sequence of a few
    keys, µs: its fixed cost (launch, split-KV tiles and their reduce), which replaces the generic
    kernel floor for an MLA layer's attention (:func:`costmodel.serving.step.mla_decode_floor`);
    None: the generic floor."""
    fp4_dequant_weights_per_s: float | None = Field(default=None, gt=0)
    """Where FP4 weights have no FP4 (or Marlin-class) kernel and the vector ALUs upcast every
    weight tile to bf16 inside the GEMM: weights the whole GPU upcasts per second, once per
    :data:`costmodel.serving.step.DEQUANT_TILE_ROWS` rows of the batch; None where the weights
    stream at their stored width."""


HBM_CEILING = 0.92
"""Highest fraction of the HBM peak a streaming kernel sustains: Microsoft measured 7.35 of 8 TB/s
(92 %) on ND GB200 v6 (Azure HPC blog "Azure's ND GB200 v6 delivers record performance for
inference", 2025); the fitted bandwidth fractions may not exceed it."""


class ServingEfficiency(BaseModel):
    """Efficiency constants of the serving model, fitted by ``bench/serving_fidelity.py --fit`` on
    the shared published serving runs (``planner/reference/serving_runs.csv``) and nothing else
    (mean absolute log error, coordinate search). The defaults below are that fit: 136 stated rows,
    median |error| 6.6 %, p90 19.0 %, bias +2.6 % when fitted; 6.4 %, 17.3 %, -0.5 % with the
    attention-DP gather and one prompt per prefill step below osl in flight, not refitted.
    Everything else in the decode step is priced from its mechanism with a cited constant: the engines' all-reduce algorithms
    (:mod:`costmodel.serving.allreduce`), the kernels per layer (``engines.EngineDefaults``), MoE
    experts touched (:mod:`costmodel.serving.moe`), the HBM rate by transfer size
(:mod:`costmodel.serving.hbm`), sliding windows and MLA (``shape``)."""

    model_config = _FROZEN
    decode_memory: float = Field(default=0.9114, gt=0, le=HBM_CEILING)
    """Achieved fraction of HBM bandwidth while decode's GEMMs stream the weights, for a large
    (>= 100 MB) stream; smaller kernels scale it by :func:`costmodel.serving.hbm.transfer_scale`."""
    kv_memory: float = Field(default=0.8854, gt=0, le=HBM_CEILING)
    """Achieved fraction of HBM bandwidth while decode attention streams the KV cache
    (FlashDecoding / paged attention over long contiguous blocks), for a large stream."""
    prefill_compute: float = Field(default=1.1165, gt=0, le=1.5)
    """Prefill GEMM rate over the training-calibrated GEMM rate of the cluster (inference kernels
    skip the training loop's overheads)."""
    request_overhead_us: float = Field(default=143.735, ge=0)
    """Scheduler and host time per request admitted (tokenise, schedule, detokenise), µs."""
    low_precision_gemm: float = Field(default=0.625, gt=0, le=1)
    """Fraction of the FP4 peak an FP4 GEMM reaches relative to the FP8 MAMF fraction."""
    roofline_sharpness: float = Field(default=1.026, ge=1, le=16)
    """Exponent p of the p-norm that joins a decode kernel's traffic and compute times
    (``StepParts.kernel``): large p is the plain roofline max, p = 1 no overlap at all."""
    moe_imbalance: float = Field(default=2.242, ge=1, le=4)
    """Time of the slowest rank over the mean where ranks hold different work: the expert GEMMs
    under expert parallelism (routed tokens are not uniform over experts) and the attention under
    attention DP (ranks do not hold equal requests); the slowest rank sets the step (DeepSeek-V3
    arXiv:2412.19437 §3.4 balances experts for this reason). Tensor-parallel experts and attention
    are balanced by construction and take no factor."""
