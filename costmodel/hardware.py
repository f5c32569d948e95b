"""The hardware spec: one accelerator (:class:`GPUSpec`), its achievable fractions of peak
(:class:`EfficiencySpec`) and the cluster of nodes (:class:`ClusterSpec`). Part of ``costmodel.specs``."""

from __future__ import annotations

from pydantic import BaseModel, Field

from costmodel.spec_types import FROZEN as _FROZEN


# ----------------------------------------------------------------------------------------------
# Hardware
# ----------------------------------------------------------------------------------------------
class GPUSpec(BaseModel):
    """One accelerator: peak rates and capacities from its datasheet (dense, no sparsity)."""

    model_config = _FROZEN
    name: str
    peak_bf16_tflops: float = Field(gt=0)
    """Dense BF16 (FP16 where no BF16) tensor-core peak, TFLOP/s."""
    hbm_gib: float = Field(gt=0)
    """Memory capacity usable by the framework, GiB."""
    hbm_bandwidth_gbps: float = Field(gt=0)
    """Memory bandwidth, GB/s."""
    peak_fp8_tflops: float | None = Field(default=None, gt=0)
    """Dense FP8 tensor-core peak, TFLOP/s; None where the GPU has no FP8 tensor cores."""
    fp8_mamf_fraction: float | None = Field(default=None, gt=0, le=1)
    """Measured FP8 GEMM ceiling over the FP8 peak (Maximum Achievable Matmul FLOPS)."""
    bf16_mamf_fraction: float | None = Field(default=None, gt=0, le=1)
    """Measured BF16 GEMM ceiling over the BF16 peak; with ``fp8_mamf_fraction`` it gives the FP8
    speed-up of a GEMM relative to the calibrated BF16 efficiency."""
    mxfp8: bool = False
    """FP8 GEMMs use MX block scaling (one scale per 32 elements in hardware: Blackwell)."""
    tdp_w: float | None = Field(default=None, gt=0)
    """Board power at which the peak clocks are sustained, W (for power-capped clusters)."""
    source: str = ""


class EfficiencySpec(BaseModel):
    """Achieved fractions of peak, calibrated on the shared published runs (see each cluster's source)."""

    model_config = _FROZEN
    gemm_max: float = Field(gt=0, le=1)
    """GEMM efficiency of large, well-shaped matmuls (fraction of peak)."""
    gemm_half_gflop: float = Field(gt=0)
    """GEMM size (GFLOP) at which efficiency is half of ``gemm_max`` (small GEMMs run slower)."""
    attention: float = Field(gt=0, le=1)
    """FlashAttention core efficiency (fraction of peak)."""
    memory: float = Field(gt=0, le=1)
    """Achieved fraction of HBM bandwidth for memory-bound kernels."""
    intra_node: float = Field(gt=0, le=1)
    """Achieved fraction of intra-node link bandwidth for large collectives (busbw / link)."""
    network: float = Field(gt=0, le=1)
    """Achieved fraction of per-GPU network bandwidth for large collectives."""
    overlap_slowdown: float = Field(default=0.1, ge=0, le=1)
    """Compute slowdown while a collective runs concurrently (fraction of the hidden comm time)."""
    kernel_overhead_us: float = Field(default=5.0, ge=0)
    """Fixed time per kernel launch (host/launch and tail), microseconds."""
    step_fixed_s: float = Field(default=0.03, ge=0)
    """Fixed time per training step outside the layers' kernels (optimizer and gradient-norm
    launches, loss / overflow synchronisations, data loading, logging), seconds. The default is the
    value ``bench/calibrate.py`` fits on the shared published runs (``costmodel.step.STEP_FIXED_S``);
    a measured cluster (``meshplan calibrate``) states its own."""


class ClusterSpec(BaseModel):
    """Nodes of identical GPUs: fast links inside a node, a network between nodes."""

    model_config = _FROZEN
    name: str
    gpu: GPUSpec
    gpus_per_node: int = Field(gt=0)
    intra_node_bandwidth_gbps: float = Field(gt=0)
    """Unidirectional bandwidth per GPU inside a node (NVLink / xGMI), GB/s."""
    network_bandwidth_gbps: float = Field(gt=0)
    """Unidirectional network bandwidth per GPU between nodes, GB/s."""
    intra_node_latency_us: float = Field(gt=0)
    """Per-hop latency inside a node, microseconds."""
    network_latency_us: float = Field(gt=0)
    """Per-hop latency across the network, microseconds."""
    efficiency: EfficiencySpec
    runtime_overhead_gib: float = Field(default=1.0, ge=0)
    """Memory taken by the CUDA context, NCCL and framework before any tensor, GiB."""
    memory_headroom_gib: float | None = Field(default=None, ge=0)
    """GiB per GPU kept free beyond the prediction (None: the measured default; ``costmodel.headroom``)."""
    power_limit_w: float | None = Field(default=None, gt=0)
    """Power cap set on every GPU, W (None: the GPU's TDP); lowers sustained clocks (``costmodel.power``)."""
    sustained_clock_fraction: float | None = Field(default=None, gt=0, le=1)
    """Measured sustained tensor-core clock over the boost clock under training load; overrides the
    estimate from ``power_limit_w``."""
    host_link_bandwidth_gbps: float | None = Field(default=None, gt=0)
    """Unidirectional GPU-host bandwidth per GPU (PCIe / C2C), GB/s, for offloading; None = no offload."""
    source: str = ""
