"""Per-rank times of a run (issue 22): what ``meshplan replan`` infers each GPU's speed from.

Plain data, part of the run record (``RunRecord.rank_times``, written only by runs that measure it:
uneven shares or an injected slowdown). Runs of replicas that pipeline add each rank's layers and its
point-to-point seconds; other records' JSON has neither key.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

_RECORD = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class RankTime(BaseModel):
    """One rank's seconds per step, every step (warm-up included, as ``step_time.all_steps_s``)."""

    model_config = _RECORD
    rank: int
    gpu: int
    """Cluster-wide GPU index of the rank's replica (the plan's device; rank r = GPU r for a uniform plan)."""
    group: int
    """The GPU's group in the plan's cluster (0 for a single-type cluster)."""
    micro_batches: int
    """Micro-batches the rank ran per step (its data-parallel share)."""
    injected_speed: float
    """``--inject-slowdown`` speed of the rank (1: none)."""
    compute_s: list[float]
    """Forward and backward seconds of each step, injected waits excluded."""
    wait_s: list[float]
    """Injected waits of each step ((1/speed - 1) x each forward's and backward's compute)."""
    sync_s: list[float]
    """Gradient all-reduce of each step, including the wait for the slowest rank."""
    layers: list[int] | None = None
    """Plan layers of the rank's pipeline stage (runs of replicas that pipeline); None: the whole model."""
    p2p_s: list[float] | None = None
    """Pipeline sends and receives of each step, including the wait for the neighbouring stages
    (runs of replicas that pipeline); None without pipelining."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("layers", "p2p_s")
    """Fields left out of a record's JSON when no rank has them (records of whole-model replicas)."""
