"""What a search is asked and what it returns (``search`` never imports ``planner``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from costmodel.specs import ParallelConfig
from costmodel.step import StepEstimate

Target = Literal["native", "megatron", "torchtitan", "deepspeed"]
Status = Literal["optimal", "feasible", "timeout"]
Bounds = tuple[int, int | None]
"""Inclusive (lowest, highest) value of one dimension; highest None = no upper bound."""


@dataclass(frozen=True)
class Constraints:
    """Dimensions the user fixed or bounded; None leaves a dimension to the search.

    An integer dimension is an inclusive range (a fixed value is ``(v, v)``). An explicit upper bound
    (or a lower bound above the cap) replaces the search's default cap of that dimension (tp: GPUs per node; cp: ``MAX_CP``; vpp:
    ``SearchRequest.max_vpp``; micro-batch: ``MAX_MICRO_BATCH``); the space's hard rules (divisibility,
    pp at most the blocks) still apply. ``recompute`` fixes one mode for every recomputable layer;
    ``schedule`` is matched by name, and a job without pipelining runs ``1f1b``.
    """

    tp: Bounds | None = None
    pp: Bounds | None = None
    cp: Bounds | None = None
    dp: Bounds | None = None
    ep: Bounds | None = None
    vpp: Bounds | None = None
    zero: Bounds | None = None
    micro_batch: Bounds | None = None
    sp: bool | None = None
    recompute: str | None = None
    schedule: str | None = None

    def allows(self, name: str, value: object) -> bool:
        """Whether ``value`` of dimension ``name`` satisfies the constraint (free dimensions: always)."""
        want = getattr(self, name)
        if want is None:
            return True
        if isinstance(want, tuple):
            lo, hi = want
            return isinstance(value, int) and lo <= value and (hi is None or value <= hi)
        return value == want

    def cap(self, name: str, default: int) -> float:
        """Largest value of ``name`` to enumerate: the explicit upper bound; else ``default``, or no
        cap when the lower bound is already above ``default``."""
        want = getattr(self, name)
        if want is None:
            return default
        lo, hi = want
        if hi is not None:
            return hi
        return default if lo <= default else float("inf")

    def __bool__(self) -> bool:
        return any(getattr(self, name) is not None for name in self.__dataclass_fields__)


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
    constraints: Constraints = field(default_factory=Constraints)
    """Dimensions fixed or bounded by the user; the search explores the rest."""
    precisions: tuple[str, ...] = ("bf16",)
    """GEMM precisions to search (``("bf16", "fp8")`` adds FP8 projections where the GPU has FP8
    tensor cores; ``costmodel.precision``)."""
    compile: bool | None = None
    """``ParallelConfig.compile`` of every candidate: True fuses the elementwise ops (torch.compile
    for torchtitan, which also lets its plans overlap TP communication: async TP), False runs them
    op by op; None: the target engine's default (``costmodel.engines``)."""


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
