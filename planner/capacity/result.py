"""The sweep's output: one record per grid point, the deadline answer per cluster, and the power
figures energy was computed from. ``SweepResult.to_json()`` is deterministic (same inputs, same
bytes: no wall times); ``to_csv()`` flattens the points into one row each."""

from __future__ import annotations

import csv
import io
from typing import Literal

from pydantic import BaseModel, ConfigDict

from planner.plans.constraints import PlanConstraints

SCHEMA = "meshplan-sweep/1"
_STRICT = ConfigDict(extra="forbid", frozen=True)


class BatchTry(BaseModel):
    """One candidate batch of a point that chooses its batch (``--global-batch auto`` or a range)."""

    model_config = _STRICT
    global_batch: int
    step_time_s: float | None
    """None when no plan fits (or none applies) at this batch."""
    relative_time: float | None
    """Time to train relative to the chosen batch (1.0 for the chosen one)."""


class SweepPoint(BaseModel):
    """The best plan for one grid point, and what training on the token budget costs with it."""

    model_config = _STRICT
    index: int
    cluster: str
    gpu: str
    gpus: int
    nodes: int
    seq_len: int
    global_batch: int | None
    """The batch of the point (fixed), or the one it chose; None when no candidate has a plan."""
    batch_tries: list[BatchTry] = []
    status: Literal["ok", "no_plan"]
    reason: str | None = None
    """Why there is no plan (nearest miss), when status is no_plan."""
    plan_summary: str | None = None
    mesh: dict[str, int | bool] | None = None
    search_status: str | None = None
    optimality_gap: float | None = None
    step_time_s: float | None = None
    tokens_per_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    mfu: float | None = None
    peak_memory_gib: float | None = None
    memory_capacity_gib: float | None = None
    memory_headroom_gib: float | None = None
    scaling_efficiency: float | None = None
    """Tokens/s per GPU relative to the smallest GPU count of the same cluster, sequence and batch."""
    tokens_needed: float | None = None
    steps: float | None = None
    time_to_train_s: float | None = None
    time_to_train_days: float | None = None
    gpu_hours: float | None = None
    cost_usd: float | None = None
    utilisation: float | None = None
    energy_kwh: float | None = None
    meets_deadline: bool | None = None
    plan_file: str | None = None
    report_file: str | None = None


class PowerInfo(BaseModel):
    """The figures energy was computed from for one cluster, with their sources."""

    model_config = _STRICT
    cluster: str
    gpu_tdp_w: float | None
    gpu_tdp_source: str
    node_overhead_w: float | None
    node_overhead_source: str


class DeadlineAnswer(BaseModel):
    """The smallest GPU count of one cluster that trains within the deadline (None: no point does)."""

    model_config = _STRICT
    cluster: str
    point: int | None
    gpus: int | None
    time_to_train_days: float | None
    cost_usd: float | None


class SweepRequest(BaseModel):
    """The inputs, echoed."""

    model_config = _STRICT
    model: str
    clusters: list[str]
    gpus: list[int]
    global_batch: list[int]
    batch_chosen_per_point: bool
    seq_len: list[int]
    target: str
    tokens: float | None
    critical_batch: int | None
    deadline_s: float | None
    price_per_gpu_hour: dict[str, float]
    constraints: PlanConstraints | None = None
    """Plan constraints applied to every point (``planner.plans.constraints``); None when all was searched."""
    slow: list[str] | None = None
    """``--slow`` items applied to every point (``planner.capacity.hetero``); left out of the JSON when None."""
    down: list[str] | None = None
    """``--down`` items applied to every point; left out of the JSON when None."""


class SweepResult(BaseModel):
    """Everything ``meshplan sweep`` writes."""

    model_config = _STRICT
    schema_version: str = SCHEMA
    request: SweepRequest
    points: list[SweepPoint]
    deadline: list[DeadlineAnswer] | None = None
    power: list[PowerInfo]
    formulas: list[str]

    def to_json(self) -> str:
        """Deterministic JSON text (a sweep without ``--slow`` / ``--down`` has neither key)."""
        unset = {name for name in ("slow", "down") if getattr(self.request, name) is None}
        return self.model_dump_json(indent=2, exclude={"request": unset} if unset else None) + "\n"

    def to_csv(self) -> str:
        """One row per point (the scalar fields of :class:`SweepPoint`; mesh flattened)."""
        skip = {"batch_tries", "mesh"}
        fields = [f for f in SweepPoint.model_fields if f not in skip] + ["dp", "tp", "pp", "cp", "ep"]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for p in self.points:
            row = {k: v for k, v in p.model_dump().items() if k not in skip}
            row.update({k: (p.mesh or {}).get(k) for k in ("dp", "tp", "pp", "cp", "ep")})
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
        return buf.getvalue()

    def deadline_miss(self) -> str | None:
        """With a deadline that no point meets: the closest point, as one line; None otherwise."""
        if self.deadline is None or any(a.point is not None for a in self.deadline):
            return None
        timed = [p for p in self.points if p.time_to_train_s is not None]
        if not timed:
            return None
        best = min(timed, key=lambda p: (p.time_to_train_s, p.index))
        deadline = self.request.deadline_s or 0.0
        over = best.time_to_train_s - deadline  # type: ignore[operator]
        return (f"no point trains within the deadline of {duration(deadline)}; closest: {best.cluster}, {best.gpus} GPUs, "
                f"batch {best.global_batch}, sequence {best.seq_len}: {duration(best.time_to_train_s)} ({duration(over)} over); "  # type: ignore[arg-type]
                f"try more GPUs, faster GPUs or a later deadline")


def duration(seconds: float) -> str:
    """``41.2 days`` from a day up, ``5.3 hours`` below."""
    return f"{seconds / 86400:,.1f} days" if seconds >= 86400 else f"{seconds / 3600:.1f} hours"
