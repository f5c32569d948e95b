"""``meshplan calibrate``: fit a cluster's efficiency factors to measured runs.

Inputs are run records of ``meshplan run`` and CSVs of the user's own measured runs
(``observations``); the few factors (``factors``: compute, memory, overhead, comm, step_fixed,
overlap) are fitted by bounded robust least squares on log step time (``fit``), with leave-one-shape-out
cross-validation so that over-fitting shows; ``output`` writes the calibrated cluster in the profiles
format that ``plan`` and ``estimate`` read.

    from planner.calibration import calibrate, load_observations
    from profiles import load_cluster
    cluster = load_cluster("my_cluster.json")
    result = calibrate(load_observations(["run1.json", "runs.csv"], cluster), cluster)
"""

from __future__ import annotations

from planner.calibration.factors import DEFAULT_FACTORS, FACTORS, Factor, apply
from planner.calibration.fit import Calibration, RunFit, calibrate, error_stats, predict
from planner.calibration.observations import Observation, load_observations
from planner.calibration.output import calibrated_entry

__all__ = [
    "DEFAULT_FACTORS", "FACTORS", "Calibration", "Factor", "Observation", "RunFit",
    "apply", "calibrate", "calibrated_entry", "error_stats", "load_observations", "predict",
]
