"""The parallel configuration: how one training step is split across GPUs and the implementation
choices that change its cost (:class:`ParallelConfig`). Part of ``costmodel.specs``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from costmodel.spec_types import FROZEN as _FROZEN
from costmodel.spec_types import AttentionImpl, Engine, Precision, Recompute, Schedule


# ----------------------------------------------------------------------------------------------
# Parallel configuration
# ----------------------------------------------------------------------------------------------
class ParallelConfig(BaseModel):
    """How one training step is split across GPUs, and the implementation choices that change cost."""

    model_config = _FROZEN
    tp: int = Field(default=1, gt=0)
    """Tensor-parallel degree (Megatron column/row splits)."""
    pp: int = Field(default=1, gt=0)
    """Pipeline-parallel degree (ranks, not virtual stages)."""
    dp: int = Field(default=1, gt=0)
    """Data-parallel degree (ZeRO / FSDP shards included)."""
    cp: int = Field(default=1, gt=0)
    """Context-parallel degree (ring attention over sequence chunks)."""
    ep: int = Field(default=1, gt=0)
    """Expert-parallel degree for MoE layers, carved out of dp x cp."""
    vpp: int = Field(default=1, gt=0)
    """Virtual pipeline stages (model chunks) per pipeline rank."""
    sp: bool = False
    """Megatron sequence parallelism (needs tp > 1)."""
    zero: Literal[0, 1, 2, 3] = 0
    """Sharding over dp: 0 none, 1 optimizer (distributed optimizer), 2 + gradients, 3 + params (FSDP)."""
    recompute: Recompute = "none"
    """Activation recomputation for every transformer layer, unless ``layer_recompute`` says otherwise."""
    layer_recompute: tuple[Recompute, ...] | None = None
    """Per-layer recomputation, one entry per model layer (overrides ``recompute``)."""
    micro_batch: int = Field(default=1, gt=0)
    global_batch: int = Field(gt=0)
    seq_len: int = Field(gt=0)
    schedule: Schedule = "1f1b"
    stage_layers: tuple[int, ...] | None = None
    """Model layers per pipeline stage (pp x vpp entries, chunk order); None = balanced split."""
    attention: AttentionImpl = "flash"
    """Attention kernel: fused FlashAttention or eager softmax (stores the s x s scores)."""
    param_bytes: int = 2
    """Bytes per parameter used in compute (bf16/fp16)."""
    grad_bytes: int = 4
    """Bytes per gradient element kept for the optimizer (Megatron keeps fp32 main grads)."""
    optimizer_bytes: int = 12
    """Optimizer state bytes per parameter (Adam: fp32 master, m, v)."""
    grad_reduce_bytes: int = 4
    """Bytes per element in the gradient reduction (fp32 by Megatron's default)."""
    overlap_grad_reduce: bool = True
    """Gradient reduction overlaps the last backward pass (bucketed)."""
    overlap_param_gather: bool = True
    """Sharded-parameter all-gathers overlap compute (prefetch)."""
    tp_comm_overlap: bool = False
    """TP communication overlaps its GEMMs (Transformer Engine userbuffers; needs sp)."""
    tp_async_backward: bool | None = None
    """The column-parallel linears' backward TP collectives run behind their GEMMs (Megatron-LM since
    its sequence-parallel release, ``LinearWithGradAccumulationAndAsyncCommunication``); None: the
    engine's default (``costmodel.engines``)."""
    zero3_bucket_params: int = Field(default=0, ge=0)
    """Parameters per ZeRO-3 collective; 0 = one collective per layer (an FSDP unit). The DeepSpeed
    export writes it as ``stage3_prefetch_bucket_size`` (default 50,000,000), which bounds how far
    DeepSpeed prefetches; its collectives are per parameter (``planner.reference.published`` uses the bucket
    count as a stand-in for their host work)."""
    engine: Engine = "native"
    """Training engine whose implementation choices the estimate models (``costmodel.engines``)."""
    precision: Precision = "bf16"
    """GEMM precision of the transformer blocks' projections (``costmodel.precision``)."""
    compile: bool | None = None
    """Elementwise ops fused into few kernels (torch.compile for torchtitan; Megatron's and
    DeepSpeed's hand-fused kernels); False runs them op by op (PyTorch eager). None: the engine's
    default (``costmodel.engines``)."""
    loss_fusion: bool | None = None
    """Fused cross-entropy (Megatron ``--cross-entropy-loss-fusion``); None: the engine's default."""
    grad_accum_fusion: bool | None = None
    """Weight-gradient GEMMs accumulate straight into the main gradients (Megatron-LM
    ``--gradient-accumulation-fusion``, on by default); False adds each micro-batch's gradients in
    a separate pass (Megatron-LM before the fusion, ``--no-gradient-accumulation-fusion``). Only
    Megatron-LM has the fusion; None: the engine's default (``costmodel.engines``)."""
    offload_optimizer: bool = False
    """Optimizer states and fp32 master weights live in host memory and the step runs on the CPU
    (DeepSpeed ZeRO-Offload, Megatron ``--optimizer-cpu-offload``, FSDP2 ``CPUOffloadPolicy``);
    needs the cluster's ``host_link_bandwidth_gbps``."""
    offload_activations: bool = False
    """Stored activations are copied to host memory after the forward and back before the backward
    (Megatron ``--cpu-offloading-num-layers``; DeepSpeed ``cpu_checkpointing``)."""

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def num_microbatches(self) -> int:
        return self.global_batch // (self.micro_batch * self.dp)
