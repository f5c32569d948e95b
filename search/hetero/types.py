"""What the heterogeneous search is asked and what it returns (plain data; ``search`` never imports
``planner``, which turns a :class:`HeteroCandidate` into a plan)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from costmodel.specs import ParallelConfig

HeteroStatus = Literal["optimal", "feasible"]


@dataclass(frozen=True)
class HeteroRequest:
    """The job and the limits of the heterogeneous search. Dimensions left None are searched."""

    global_batch: int
    seq_len: int
    top_k: int = 3
    tps: tuple[int, ...] | None = None
    """TP degrees to try (default: powers of two up to the largest group's GPUs per node)."""
    pps: tuple[int, ...] | None = None
    """Pipeline depths to try (default: 1 to ``max_pp``, at most the transformer blocks)."""
    max_pp: int = 8
    micro_batches: tuple[int, ...] | None = None
    """Micro-batch sizes to try (default: powers of two up to 8); only those that divide the global
    batch are used (the data-parallel shares are whole micro-batches)."""
    zeros: tuple[int, ...] = (1,)
    """ZeRO stages to try (job-wide: the data-parallel group spans every replica)."""
    recomputes: tuple[str, ...] = ("none", "selective", "full")
    """Uniform recomputation modes a replica may take, fastest first (each replica takes the first
    that fits its GPUs)."""
    count_limit: int = 4000
    """Most replica mixes (replicas per kind) enumerated per base option; past it the search packs
    the GPUs by rule (``search.hetero.units.packings``) and the result is no longer proven."""


@dataclass(frozen=True)
class ReplicaSpec:
    """One data-parallel replica as a plan states it: enough to price it again (``estimate --plan``)."""

    stage_devices: tuple[tuple[int, ...], ...]
    """Cluster-wide GPU indices of each pipeline stage (tp GPUs, one node of one group)."""
    stage_layers: tuple[int, ...] | None
    """Model layers per stage (None: one stage, or the balanced split)."""
    micro_batches: int
    """Micro-batches this replica runs per step (its data-parallel share)."""
    recompute: str = "none"


@dataclass(frozen=True)
class HeteroStage:
    """One pipeline stage of a replica, on one GPU group."""

    group: int
    """Index of the cluster group its GPUs belong to."""
    cluster: str
    """That group's cluster name (GPU type and node)."""
    speed: float
    """Slowest speed among its GPUs (what the stage runs at)."""
    layers: tuple[int, ...]
    """Indices into the model's ordered layer list."""
    devices: tuple[int, ...]
    time_s: float
    """Per micro-batch forward + backward + recompute + exposed communication."""
    memory_gib: float
    capacity_gib: float


@dataclass(frozen=True)
class HeteroReplica:
    """One data-parallel replica: its stages, share of the batch and gradient weight."""

    stages: tuple[HeteroStage, ...]
    micro_batches: int
    share: float
    """Fraction of the global batch it processes (micro_batches / total micro-batches)."""
    grad_weight: float
    """Factor on its averaged gradient before the mean all-reduce (``costmodel.hetero.gradient_weights``)."""
    recompute: str
    step_time_s: float
    """Time this replica needs for its share, up to and including the gradient sync and optimizer."""

    @property
    def fits(self) -> bool:
        return all(s.memory_gib <= s.capacity_gib for s in self.stages)

    @property
    def spec(self) -> ReplicaSpec:
        sizes = tuple(len(s.layers) for s in self.stages)
        return ReplicaSpec(tuple(s.devices for s in self.stages), sizes if len(sizes) > 1 else None,
                           self.micro_batches, self.recompute)


@dataclass(frozen=True)
class HeteroCandidate:
    """A heterogeneous plan: job-level degrees (``config.dp`` = replicas) and every replica."""

    config: ParallelConfig
    replicas: tuple[HeteroReplica, ...]
    step_time_s: float
    """The slowest replica's step (every replica meets at the gradient sync)."""

    @property
    def fits(self) -> bool:
        return all(r.fits for r in self.replicas)

    @property
    def gpus_used(self) -> int:
        return sum(len(s.devices) for r in self.replicas for s in r.stages)


@dataclass(frozen=True)
class HeteroStats:
    """Facts about the search run."""

    evaluated: int
    """Replica mixes whose micro-batch allocation was solved."""
    pruned: int
    """Mixes skipped because their lower bound could not beat the k-th best (``search.hetero.bound``)."""
    status: HeteroStatus
    """optimal: every base option's mixes and splits were enumerated (exact over the space)."""
    gap: float | None
    """0 when optimal; else (best − bound) / bound with the bound of ``search.hetero.gap`` (a lower
    bound on every plan of the space searched); None when nothing fits."""
    wall_time_s: float


@dataclass(frozen=True)
class HeteroResult:
    """Best plan first, then runners-up (``best`` None when nothing fits)."""

    best: HeteroCandidate | None
    alternatives: tuple[HeteroCandidate, ...]
    stats: HeteroStats
