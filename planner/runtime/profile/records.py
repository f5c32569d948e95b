"""The raw measurements ``meshplan profile`` keeps beside the numbers it derives (``measurements`` in
the cluster file). Units are in the field names; every row is one timed operation on one rank, the
median over ranks for compute and the slowest rank for collectives."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

_ROW = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class GemmPoint(BaseModel):
    """One (m x k) @ (k x n) matmul at a transformer layer's shape."""

    model_config = _ROW
    role: str
    """Which projection: ``qkv``, ``proj``, ``fc1``, ``fc2`` (hidden size and TP split in ``shape``)."""
    shape: str
    m: int
    n: int
    k: int
    dtype: str
    time_s: float
    tflops: float


class AttentionPoint(BaseModel):
    """Causal scaled-dot-product attention, forward and backward, through one SDPA backend."""

    model_config = _ROW
    backend: str
    """``default`` (what SDPA picks) or a forced ``torch.nn.attention.SDPBackend``."""
    batch: int
    heads: int
    seq_len: int
    head_dim: int
    dtype: str
    time_s: float
    """Forward plus backward."""
    tflops: float
    """Cost-model FLOPs (causal half of the s x s work, backward 2.5 x forward) per second."""
    efficiency: float
    """Of the device peak, normalised to head dim 128 as ``costmodel.kernels.attention_time`` scales it."""


class MemoryPoint(BaseModel):
    """A memory-bound kernel streaming a buffer: ``copy`` reads and writes it once."""

    model_config = _ROW
    op: Literal["copy"]
    bytes: int
    time_s: float
    gbps: float
    """Bytes moved (read + write) per second, GB/s."""


class CollectivePoint(BaseModel):
    """One collective over a process group, nccl-tests conventions (NVIDIA/nccl-tests doc/PERFORMANCE.md)."""

    model_config = _ROW
    op: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"]
    scope: Literal["intra_node", "inter_node"]
    ranks: int
    bytes: int
    """Buffer size S: the reduced buffer, the gathered output, the scattered input, the message."""
    time_s: float
    """Slowest rank's median time."""
    algbw_gbps: float
    """S / time, GB/s."""
    busbw_gbps: float
    """algbw x the bus factor: 2(n-1)/n all-reduce, (n-1)/n gather / scatter / all-to-all, 1 send/recv."""
    model_s: float | None = None
    """What the written cluster's ``costmodel.comm`` predicts for the same collective."""
