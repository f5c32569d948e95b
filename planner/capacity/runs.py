"""The sweep's run-time data: the parsed grid (:class:`Grid`), where each point sits in it
(:class:`PointKey`) and the finished run (:class:`SweepRun`: the result with each point's plan and report)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import planner.capacity.grid as grid
from planner.capacity.result import SweepResult


@dataclass(frozen=True)
class Grid:
    """The parsed grid and budget."""

    clusters: tuple[str, ...]
    gpus: tuple[int, ...]
    batches: grid.BatchChoice
    seq_lens: tuple[int, ...]
    tokens: float | None
    critical_batch: int | None
    deadline_s: float | None
    prices: dict[str, float]


@dataclass(frozen=True)
class SweepRun:
    """The sweep's result, and each point's plan JSON (and HTML report, when asked) by point index."""

    result: SweepResult
    plans: dict[int, str] = field(default_factory=dict)
    reports: dict[int, str] = field(default_factory=dict)

    def plan(self, index: int) -> Any:
        """The :class:`~planner.plans.schema.Plan` of point ``index``."""
        from planner.plans.schema import Plan

        return Plan.model_validate_json(self.plans[index])


@dataclass(frozen=True)
class PointKey:
    """Where a point sits in the grid, and its tasks (one per batch tried)."""

    index: int
    cluster: str
    gpus: int
    seq_len: int
    tasks: tuple[int, ...]
