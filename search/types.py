"""What a search is asked and what it returns (``search`` never imports ``planner``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from costmodel.specs import ParallelConfig
from costmodel.step import StepEstimate

Target = Literal["native", "megatron", "torchtitan", "deepspeed"]
Status = Literal["optimal", "feasible", "timeout"]


@dataclass(frozen=True)
class SearchRequest:
    """The job to plan and the limits of the search."""

    gpus: int
    global_batch: int
    seq_len: int
    target: Target = "native"
    top_k: int = 3
    time_limit_s: float | None = None
    max_tp: int | None = None
    """Largest TP degree to try (default: GPUs per node)."""
    micro_batches: tuple[int, ...] | None = None
    """Micro-batch sizes to try (default: every divisor of the per-replica batch up to 16)."""
    max_vpp: int = 8
    """Most virtual stages per pipeline rank for interleaved 1F1B (Megatron-Core runs up to one layer
    per virtual stage; the Megatron-Core r0.8.0 462B weak-scaling run uses 7)."""
    nonuniform: bool = True
    """Search non-uniform stage splits and per-layer recomputation (False: uniform only)."""


@dataclass(frozen=True)
class Candidate:
    """One evaluated configuration."""

    config: ParallelConfig
    estimate: StepEstimate

    @property
    def step_time_s(self) -> float:
        return self.estimate.step_time_s

    @property
    def fits(self) -> bool:
        return self.estimate.fits


@dataclass(frozen=True)
class SearchStats:
    """Facts about the search run."""

    evaluated: int
    pruned: int
    solver: str
    status: Status
    gap: float
    """Relative gap to the best lower bound of anything not explored (0 when proven optimal)."""
    wall_time_s: float


@dataclass(frozen=True)
class SearchResult:
    """Best plan first, then runners-up; ``nearest_miss`` is the configuration closest to fitting
    when none fits (``best`` is None then)."""

    best: Candidate | None
    alternatives: tuple[Candidate, ...]
    stats: SearchStats
    nearest_miss: Candidate | None = None
    hints: tuple[str, ...] = field(default_factory=tuple)
    """What would make a plan fit, when none does."""
