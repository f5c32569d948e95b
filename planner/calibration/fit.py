"""Fit the factors (``factors``) to measured step times, and say how well it generalises.

Objective: the residual of a run is log(predicted / measured) step time (a relative error, the same
weight for a 10 ms and a 10 s step); ``scipy.optimize.least_squares`` minimises their soft-L1 loss
(robust: a run disturbed by a neighbour pulls less than in plain least squares; Triggs et al.,
"Bundle Adjustment - A Modern Synthesis", 2000, sec. 3.3 for the loss) over log factors within their
bounds. Before fitting, a fit that the runs cannot determine is refused: a factor that changes no
run's time, fewer distinct shapes than factors, or factors that move every run in the same proportion
(a near-singular sensitivity matrix). Cross-validation leaves out every run of one shape at a time,
refits on the rest and predicts the shape left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from costmodel.specs import ClusterSpec
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.calibration.factors import DEFAULT_FACTORS, FACTORS, apply
from planner.calibration.observations import Observation
from planner.errors import InputError

EXERCISED = 0.02
"""A factor is exercised when moving it from a tenth to ten times its value moves some run's step
time by at least 2 % (a wide probe: an absolute time such as ``step_fixed`` may start tiny)."""
SINGULAR = 1e-3
"""Smallest / largest singular value of the normalised sensitivities below which factors are confounded."""
F_SCALE = 0.05
"""Soft-L1 scale on log time: residuals beyond about 5 % count linearly, not quadratically."""


@dataclass(frozen=True)
class RunFit:
    """One run's predictions before, after, and left out of the fit."""

    obs: Observation
    before_s: float
    after_s: float
    held_out_s: float | None
    """Predicted by the fit on every other shape; None when too few shapes remain to fit."""
    predicted_memory_gib: float


@dataclass(frozen=True)
class Calibration:
    """The fitted factors, the calibrated cluster and every run's errors."""

    start: dict[str, float]
    values: dict[str, float]
    kept: dict[str, str]
    """Factors left as they were, with the reason (not exercised by these runs)."""
    cluster: ClusterSpec
    runs: list[RunFit]
    cost: float
    """Final soft-L1 objective."""


def predict(obs: Observation, cluster: ClusterSpec) -> tuple[float, float]:
    """(step time s, peak memory GiB) the cost model predicts for ``obs`` on ``cluster``."""
    est = estimate_step(build_cost_table(obs.model, cluster), obs.config)
    return est.step_time_s, est.peak_memory_gib


def calibrate(runs: list[Observation], cluster: ClusterSpec, params: list[str] | None = None) -> Calibration:
    """Fit ``params`` (default: the :data:`DEFAULT_FACTORS` these runs exercise) of ``cluster`` to
    ``runs``; raises InputError naming why when the fit is under-determined."""
    explicit = params is not None
    names = list(params) if params is not None else list(DEFAULT_FACTORS)
    unknown = [n for n in names if n not in FACTORS]
    if unknown:
        raise InputError(f"--params: unknown factor{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} (choose from {', '.join(FACTORS)})")
    if not runs:
        raise InputError("no runs to calibrate on: give run records (meshplan run -o) or a CSV of measured runs")
    measured = np.log([r.step_time_s for r in runs])
    start = {n: FACTORS[n].start(cluster) for n in names}
    idle = _idle(runs, cluster, start)
    if idle and explicit:
        them = "them" if len(idle) > 1 else "it"
        raise InputError(f"under-determined fit: the runs do not exercise {', '.join(idle)} (from a tenth to ten times its value it moves "
                         f"no run's step time by {EXERCISED:.0%}); drop {them} from --params or add runs that use {them}")
    kept = {n: "not exercised by these runs" for n in idle}
    names = [n for n in names if n not in idle]
    if not names:
        raise InputError("under-determined fit: the runs exercise none of the factors; add runs or name --params")
    start = {n: start[n] for n in names}
    _check_determined(runs, names, _sensitivities(runs, cluster, start))
    values, cost = _fit(runs, measured, cluster, start)
    fitted = apply(cluster, values)
    held = _leave_one_shape_out(runs, measured, cluster, start)
    rows = []
    for i, obs in enumerate(runs):
        after, memory = predict(obs, fitted)
        rows.append(RunFit(obs, predict(obs, cluster)[0], after, held[i], memory))
    return Calibration(start, values, kept, fitted, rows, cost)


def _idle(runs: list[Observation], cluster: ClusterSpec, start: dict[str, float]) -> list[str]:
    """Factors no run's step time responds to (see :data:`EXERCISED`)."""
    idle = []
    for name, value in start.items():
        low = [predict(r, apply(cluster, {name: value / 10}))[0] for r in runs]
        high = [predict(r, apply(cluster, {name: value * 10}))[0] for r in runs]
        if max(abs(math.log(h / lo)) for h, lo in zip(high, low)) < math.log(1 + EXERCISED):
            idle.append(name)
    return idle


def _sensitivities(runs: list[Observation], cluster: ClusterSpec, start: dict[str, float]) -> np.ndarray:
    """d log(step time) / d log(factor) of every run (rows) and factor (columns), by a 10 % step down
    (every factor can move down; a multiplier at its cap cannot move up)."""
    base = np.log([predict(r, cluster)[0] for r in runs])
    cols = []
    for name, value in start.items():
        moved = apply(cluster, {name: value * 0.9})
        cols.append((np.log([predict(r, moved)[0] for r in runs]) - base) / math.log(0.9))
    return np.stack(cols, axis=1)


def _check_determined(runs: list[Observation], names: list[str], sens: np.ndarray) -> None:
    """Refuse fewer distinct shapes than factors, and factors the runs cannot tell apart."""
    shapes = len({r.shape for r in runs})
    if shapes < len(names):
        raise InputError(f"under-determined fit: {len(runs)} run{'s' if len(runs) > 1 else ''} of {shapes} distinct shape"
                         f"{'s' if shapes > 1 else ''} for {len(names)} factors ({', '.join(names)}); add runs of other shapes "
                         f"or fit fewer (--params {','.join(names[:shapes])})")
    norm = sens / np.maximum(np.linalg.norm(sens, axis=0), 1e-30)
    _, singular, vt = np.linalg.svd(norm, full_matrices=False)
    if len(names) > 1 and singular[-1] < SINGULAR * singular[0]:
        null = np.abs(vt[-1])
        pair = [names[i] for i in np.argsort(null)[::-1][:2]]
        raise InputError(f"under-determined fit: the runs cannot tell {pair[0]} from {pair[1]} (they move every run's step time "
                         f"alike); add runs of other shapes or fit one of them (--params)")


def _fit(runs: list[Observation], measured: np.ndarray, cluster: ClusterSpec, start: dict[str, float]) -> tuple[dict[str, float], float]:
    """Bounded robust least squares over log factors, from ``start``."""
    names = list(start)
    low = np.log([FACTORS[n].low for n in names])
    high = np.log([FACTORS[n].upper(cluster) for n in names])
    x0 = np.clip(np.log([start[n] for n in names]), low + 1e-9, high - 1e-9)

    def residual(x: np.ndarray) -> np.ndarray:
        trial = apply(cluster, dict(zip(names, np.exp(x))))
        return np.log([predict(r, trial)[0] for r in runs]) - measured

    result = least_squares(residual, x0, bounds=(low, high), loss="soft_l1", f_scale=F_SCALE, diff_step=1e-3, max_nfev=60)
    return {n: float(v) for n, v in zip(names, np.exp(result.x))}, float(result.cost)


def _leave_one_shape_out(runs: list[Observation], measured: np.ndarray, cluster: ClusterSpec,
                         start: dict[str, float]) -> list[float | None]:
    """Each run's step time predicted by a fit, from the same start, on the runs of every other shape
    (None where the remaining shapes are fewer than the factors)."""
    shapes = sorted({r.shape for r in runs})
    held: list[float | None] = [None] * len(runs)
    for shape in shapes:
        train = [i for i, r in enumerate(runs) if r.shape != shape]
        if len({runs[i].shape for i in train}) < len(start):
            continue
        values, _ = _fit([runs[i] for i in train], measured[train], cluster, start)
        fold = apply(cluster, values)
        for i, r in enumerate(runs):
            if r.shape == shape:
                held[i] = predict(r, fold)[0]
    return held


def error_stats(predicted: list[float | None], measured: list[float]) -> tuple[float, float, int] | None:
    """(mean |error|, max |error|, runs) of predicted / measured - 1 over the runs with a prediction."""
    errs = [abs(p / m - 1.0) for p, m in zip(predicted, measured) if p is not None]
    return (sum(errs) / len(errs), max(errs), len(errs)) if errs else None
