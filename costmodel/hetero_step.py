"""One data-parallel replica whose pipeline stages may run on different GPU groups.

Every stage is priced on its own group's hardware (a :class:`~costmodel.table.CostTable` of the
model on that group's :class:`ClusterSpec`, speed-scaled by ``costmodel.hetero.scale_cluster``);
the pipeline combines the stages' per-micro-batch times with the schedule formula of
``costmodel.pipeline`` (Narayanan et al. 2021 §2.2, generalised to unequal stages), and the terms
outside the pipeline (gradient reduction, optimizer, pipeline transfers, accumulation, stragglers)
are the slowest group's. On a replica whose stages all share one table this is exactly
:func:`costmodel.step.estimate_step` (same numbers, same arithmetic).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from costmodel.headroom import usable_gib
from costmodel.pipeline import pipeline_time
from costmodel.specs import ParallelConfig
from costmodel.step import StepEstimate, estimate_step
from costmodel.table import CostTable


@dataclass(frozen=True)
class ReplicaEstimate:
    """Predicted step of one replica: its pipeline on its stages' groups."""

    step_time_s: float
    pipeline_s: float
    """Pipelined micro-batches (compute, recompute, exposed per-layer communication, bubble)."""
    other_s: float
    """Terms outside the pipeline (gradient reduction, optimizer, transfers): the slowest group's."""
    stage_time_s: tuple[float, ...]
    """Per micro-batch time of each stage."""
    stage_capacity_gib: tuple[float, ...]
    """Memory of each stage's GPU type."""
    estimates: tuple[StepEstimate, ...]
    """The step estimate of each distinct table, in order of first use (for breakdowns)."""
    stage_table: tuple[int, ...]
    """Index into ``estimates`` of each stage's table."""

    @functools.cached_property
    def stage_memory_gib(self) -> tuple[float, ...]:
        """Peak memory of each stage's GPUs: rank s of its own table's estimate (computed on demand)."""
        if len(self.estimates) == 1:
            return tuple(self.estimates[0].rank_memory_gib)
        return tuple(self.estimates[w].rank_memory_gib[s] for s, w in enumerate(self.stage_table))

    @functools.cached_property
    def fits(self) -> bool:
        """Every stage fits its own GPU type's memory (per-type check, issue 22)."""
        if len(self.estimates) == 1:
            return self.estimates[0].fits
        return all(m <= c for m, c in zip(self.stage_memory_gib, self.stage_capacity_gib))

    @property
    def over_by_gib(self) -> float:
        """Largest shortfall of a stage, GiB (0 when it fits)."""
        return max(0.0, *(m - c for m, c in zip(self.stage_memory_gib, self.stage_capacity_gib)))


def estimate_replica(stage_tables: Sequence[CostTable], cfg: ParallelConfig) -> ReplicaEstimate:
    """Price a replica whose stage ``s`` runs on ``stage_tables[s]`` (one per pipeline rank, vpp 1).

    ``cfg`` is the replica's configuration: ``dp`` the job's replica count (ZeRO shards and the
    gradient ring span every replica), ``num_microbatches`` this replica's share (``global_batch =
    share · micro_batch · dp``), ``stage_layers`` its split. Stage s's time and memory are rank s of
    ``estimate_step`` on its table; the step is ``pipeline_time`` over the stage times plus the
    largest of the tables' non-pipeline terms (``step_time_s − pipeline_s`` of each)."""
    if len(stage_tables) != cfg.pp or cfg.vpp != 1:
        raise ValueError(f"{len(stage_tables)} stage tables for pp {cfg.pp} x vpp {cfg.vpp}: one table per rank, vpp 1")
    distinct: list[CostTable] = []
    for table in stage_tables:
        if not any(table is seen for seen in distinct):
            distinct.append(table)
    estimates = [estimate_step(table, cfg) for table in distinct]
    if len(distinct) == 1:
        return _single(estimates[0], cfg)
    which = [next(i for i, seen in enumerate(distinct) if seen is table) for table in stage_tables]
    times = tuple(estimates[w].rank_time_s[s] for s, w in enumerate(which))
    pipe_s, _ = pipeline_time(times, cfg.num_microbatches, 1, cfg.schedule)
    other_s = max(est.step_time_s - est.pipeline_s for est in estimates)
    return ReplicaEstimate(
        step_time_s=pipe_s + other_s, pipeline_s=pipe_s, other_s=other_s, stage_time_s=times,
        stage_capacity_gib=tuple(usable_gib(distinct[w].cluster) for w in which),
        estimates=tuple(estimates), stage_table=tuple(which),
    )


def _single(est: StepEstimate, cfg: ParallelConfig) -> ReplicaEstimate:
    """A replica on one table: ``estimate_step``'s own numbers."""
    return ReplicaEstimate(
        step_time_s=est.step_time_s, pipeline_s=est.pipeline_s, other_s=est.step_time_s - est.pipeline_s,
        stage_time_s=tuple(est.rank_time_s), stage_capacity_gib=(est.capacity_gib,) * cfg.pp,
        estimates=(est,), stage_table=(0,) * cfg.pp,
    )
