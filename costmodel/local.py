"""Per-layer cost records: what one layer's cost depends on, and what it costs.

A :class:`LocalConfig` holds what a layer's cost depends on (its share of the tokens, TP/CP/EP
degrees, SP, recomputation, attention kernel, ZeRO-3 sharding); a :class:`LayerCost` is the cost of
one layer for one micro-batch on one GPU, with communication kept apart as link time and exposed time.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.engines import EngineTerms
from costmodel.specs import Recompute

ACT_BYTES = 2
"""Bytes per activation element (bf16/fp16 training)."""


@dataclass(frozen=True)
class LocalConfig:
    """What one layer's cost depends on; hashable, so per-layer costs can be memoised by the caller."""

    micro_batch: int
    seq_len: int
    tp: int
    cp: int
    ep: int
    sp: bool
    recompute: Recompute
    flash: bool
    zero3_group: int
    """Ranks sharding the parameters under ZeRO-3 (dp x cp), 1 when parameters are not sharded."""
    grad_reduce_bytes: int = 4
    tp_comm_overlap: bool = False
    zero3_bucket_params: int = 0
    """Parameters per ZeRO-3 collective (0: one per layer); each collective pays the ring latency."""
    zero3_overlap: bool = True
    """ZeRO-3 gathers are prefetched behind compute (False: fetched on demand, fully exposed)."""
    terms: EngineTerms | None = None
    """The engine's behaviour (``costmodel.engines``); None = the native engine."""
    fp8_speedup: float = 1.0
    """FP8 over BF16 GEMM rate of the blocks' projections (``costmodel.precision``); 1 = bf16."""

    @property
    def fp8(self) -> bool:
        return self.fp8_speedup > 1.0

    @property
    def tokens(self) -> float:
        """Tokens of one micro-batch held by one context-parallel rank."""
        return self.micro_batch * self.seq_len / self.cp

    @property
    def sp_div(self) -> int:
        return self.tp if self.sp else 1

    @property
    def expert_tp(self) -> int:
        """TP ranks an MoE block's routed experts are split over: ``tp`` (Megatron's expert-TP = TP),
        or 1 where the engine runs them whole on every TP rank (``EngineTerms.replicates_experts_over_tp``)."""
        return 1 if self.terms is not None and self.terms.replicates_experts_over_tp else self.tp


@dataclass(frozen=True)
class LayerCost:
    """Per micro-batch, per GPU. Times in seconds, memory in bytes."""

    fwd_s: float
    """Forward compute, communication excluded."""
    bwd_s: float
    """Backward compute (activation and weight gradients)."""
    recompute_s: float
    """Forward work repeated in the backward pass under recomputation."""
    comm_link_s: dict[str, float]
    """Time the layer's collectives occupy their links, by dimension (tp, cp, ep, dp)."""
    comm_exposed_s: float
    """Communication time not hidden behind compute."""
    comm_hidden_s: float
    """Communication time overlapped with compute (slows that compute; EfficiencySpec.overlap_slowdown)."""
    act_bytes: float
    """Activations stored for the backward pass."""
    work_bytes: float
    """Transient memory while this layer runs (recomputed activations, logits)."""
    params: float
    """Parameters held on this GPU after TP / EP splitting, before ZeRO sharding."""
    expert_params: float
    """Of ``params``, the expert parameters (sharded over the expert data-parallel group)."""
    out_bytes: float
    """Bytes of the layer output (a pipeline cut after this layer sends them)."""
    work_stored_bytes: float = 0.0
    """Of ``act_bytes``, the bytes ``work_bytes`` holds again: a recomputed layer's stored tensors that
    its recomputation reuses rather than rebuilds (``costmodel.activations.recomputed_stored_bytes``)."""
