"""What a trace returns: the ModelSpec, plus the measured facts behind each of its layers."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from costmodel.specs import LayerEdge, ModelSpec

_FROZEN = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class LayerTrace(BaseModel):
    """Measured totals of one layer of the spec (same index), for one micro-batch at the traced shape."""

    model_config = _FROZEN
    name: str
    kind: str
    """The spec layer's kind (``transformer``, ``embedding``, ``norm``, ``head``, ``generic``)."""
    modules: tuple[str, ...]
    """Module paths of the unit calls merged into this layer (``path#k`` for a repeated call)."""
    params: int = Field(ge=0)
    """Parameters the module tree holds for this layer (shared tensors counted once, where first used)."""
    fwd_flops: float = Field(ge=0)
    """Forward FLOPs that scale with tokens (GEMMs, convolutions), at the traced shape."""
    fwd_attn_flops: float = Field(ge=0)
    """Forward FLOPs of attention-like work (quadratic in context; causal SDPA halved)."""
    fwd_mem_bytes: float = Field(ge=0)
    """Bytes read and written by memory-bound ops, at training precision."""
    activation_bytes: float = Field(ge=0)
    """Bytes autograd saved for backward (parameters excluded)."""
    output_bytes: float = Field(ge=0)
    """Bytes of input-dependent tensors this layer hands to later layers (or returns)."""
    ops: int = Field(ge=0)
    """Ops recorded for this layer (a stubbed repeat counts its representative's)."""
    stub_of: str | None = None
    """Module path of the traced representative when this layer reused its trace; ``<opaque>`` when
    the block could not run and was described from its structure."""


class ModelTrace(BaseModel):
    """A traced model: its spec, per-layer measurements, and every data edge between layers."""

    model_config = _FROZEN
    spec: ModelSpec
    layers: tuple[LayerTrace, ...]
    """One entry per ``spec.layers`` entry."""
    edges: tuple[LayerEdge, ...]
    """Every edge between layers (neighbours included), bytes per token."""
    method: str
    """How the forward ran: ``export`` (torch.export), ``meta`` (eager) or ``fake`` (FakeTensorMode)."""
    micro_batch: int = Field(gt=0)
    seq_len: int = Field(gt=0)
    tokens: int = Field(gt=0)
    """Tokens in the traced micro-batch (the divisor of every per-token figure in the spec)."""
    context: int = Field(gt=0)
    """Context length attention-like FLOPs were divided by (the sequence or patch count)."""
    seconds: float = Field(ge=0)
    """Wall time of the trace."""

    @property
    def fwd_flops(self) -> float:
        """Forward FLOPs of the traced micro-batch (all layers, attention included)."""
        return sum(layer.fwd_flops + layer.fwd_attn_flops for layer in self.layers)

    @property
    def params(self) -> int:
        """Parameters of the traced module."""
        return sum(layer.params for layer in self.layers)
