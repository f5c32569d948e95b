"""The calibrated cluster as a file ``plan`` / ``estimate`` read: the input cluster's entry (preset or
file) with the fitted efficiencies, each cited by the fit, and a ``calibration`` block with the
factors, the runs and the errors before, after and under cross-validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planner.calibration.factors import FACTORS
from planner.calibration.fit import Calibration, error_stats
from planner.calibration.observations import observation_json


def calibrated_entry(cluster_arg: str, calib: Calibration, name: str) -> dict[str, Any]:
    """The output cluster object (``profiles`` format, inline GPU)."""
    from profiles import cluster_sources

    spec = calib.cluster
    entry: dict[str, Any] = spec.model_dump(mode="json", exclude={"efficiency", "source"})
    entry["name"] = name
    entry["source"] = f"{spec.source or spec.name}; efficiencies calibrated by meshplan calibrate on {len(calib.runs)} runs"
    entry["efficiency"] = spec.efficiency.model_dump(mode="json")
    sources = dict(cluster_sources(cluster_arg))
    runs = ", ".join(sorted({Path(r.obs.label.split(':')[0]).name for r in calib.runs}))
    for factor, value in calib.values.items():
        for field in FACTORS[factor].fields:
            key = field if FACTORS[factor].on_cluster else f"efficiency.{field}"
            sources[key] = (f"meshplan calibrate: factor '{factor}' = {value:.4g} ({FACTORS[factor].doc}) "
                            f"fitted on {len(calib.runs)} runs ({runs}); before: {sources.get(key, 'n/a')}")
    entry["sources"] = sources
    measurements = _measurements(cluster_arg)
    if measurements is not None:
        entry["measurements"] = measurements
    entry["calibration"] = calibration_block(calib)
    return entry


def calibration_block(calib: Calibration) -> dict[str, Any]:
    """Factors, runs and error summaries, JSON-ready."""
    measured = [r.obs.step_time_s for r in calib.runs]
    return {
        "factors": {n: {"value": calib.values[n], "start": calib.start[n], "doc": FACTORS[n].doc} for n in calib.values},
        "kept": calib.kept,
        "error_definition": "predicted / measured - 1 of the median step time",
        "errors": {
            "before": _stats(error_stats([r.before_s for r in calib.runs], measured)),
            "after": _stats(error_stats([r.after_s for r in calib.runs], measured)),
            "leave_one_shape_out": _stats(error_stats([r.held_out_s for r in calib.runs], measured)),
        },
        "runs": [
            {**observation_json(r.obs), "before_s": r.before_s, "after_s": r.after_s, "held_out_s": r.held_out_s,
             "predicted_memory_gib": r.predicted_memory_gib}
            for r in calib.runs
        ],
    }


def _stats(stats: tuple[float, float, int] | None) -> dict[str, float] | None:
    return None if stats is None else {"mean_abs": stats[0], "max_abs": stats[1], "runs": stats[2]}


def _measurements(cluster_arg: str) -> Any:
    """The input file's raw profile measurements, carried over (None for a preset)."""
    from planner.errors import InputError
    from planner.intake.jsonio import read_json

    path = Path(cluster_arg)
    if not path.is_file():
        return None
    try:
        data = read_json(path, f"cluster file {path}", "fix the file")
    except InputError:
        return None
    return data.get("measurements") if isinstance(data, dict) else None
