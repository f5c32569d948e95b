"""From measurements to the numbers the cost model reads (``costmodel.specs.ClusterSpec``).

Each derivation inverts the cost model's own formula, so that the written cluster reproduces what was
measured at the anchor points:

- GEMMs: ``costmodel.kernels.gemm_time`` is t(F) = (F + F_half) / (peak x gemm_max); a robust fit
  of that line through the measured (F, t) on log time gives the slope 1 / (peak x
  gemm_max) (the Maximum Achievable Matmul FLOPS, stas00/ml-engineering compute/accelerator) and the
  intercept F_half / (peak x gemm_max).
- Attention: ``costmodel.kernels.attention_time`` is FLOPs / (peak x attention x sqrt(min(1, d/128)))
  plus one kernel overhead per pass; the median over the measured shapes of SDPA's own choice.
- Memory: ``memory_time`` streams bytes at hbm_bandwidth x memory.
- Links: ``costmodel.comm``'s ring collectives (NCCL's protocols, Hockney alpha-beta) fitted to the
  measured all-reduce, all-gather and reduce-scatter times for the busbw efficiency and hop latency.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import numpy as np
from scipy.optimize import least_squares

from costmodel import comm
from costmodel.specs import ClusterSpec


def fit_gemm_line(flops: list[float], seconds: list[float]) -> tuple[float, float]:
    """(ceiling FLOP/s, F_half FLOPs) of t = (F + F_half) / ceiling: robust least squares on the log
    of the time (``scipy.optimize.least_squares``, soft-L1 loss, so one GEMM slowed by a neighbour on
    a shared machine does not move the line), F_half bounded to [0, largest F]."""
    f = np.asarray(flops, dtype=float)
    t = np.asarray(seconds, dtype=float)
    scale = float(np.median(f))

    def residual(x: np.ndarray) -> np.ndarray:
        return np.log((f + x[1] * scale) / np.exp(x[0])) - np.log(t)

    start = [float(np.log(np.max(f / t))), 0.1]
    fit = least_squares(residual, start, bounds=([-np.inf, 0.0], [np.inf, float(np.max(f)) / scale]), loss="soft_l1", f_scale=0.1)
    return float(np.exp(fit.x[0])), float(fit.x[1] * scale)


def attention_efficiency(flops: float, seconds: float, head_dim: int, peak_flops: float, overhead_s: float) -> float:
    """Fraction of peak one attention forward + backward reached, normalised to head dim 128 the way
    ``costmodel.kernels.attention_time`` scales narrow heads, less its two kernel overheads."""
    narrow = min(1.0, head_dim / 128) ** 0.5
    busy = max(seconds - 2 * overhead_s, 0.25 * seconds)
    return flops / (peak_flops * narrow * busy)


LINK_OPS: dict[str, Callable[[ClusterSpec, comm.Group, float], float]] = {
    "all_reduce": comm.all_reduce,
    "all_gather": comm.all_gather,
    "reduce_scatter": comm.reduce_scatter,
}
"""The ring collectives a link fit uses: the ones data, tensor and sequence parallelism run."""


def fit_link(
    base: ClusterSpec, across: bool, per_node: int, bandwidth_gbps: float,
    points: list[tuple[str, int, int, float]],
) -> tuple[float, float]:
    """(busbw efficiency, per-hop LL128 latency us) of a link of ``bandwidth_gbps`` such that
    ``costmodel.comm`` reproduces the measured ``(op, ranks, bytes, seconds)`` ring collectives:
    robust least squares on log time (soft-L1), efficiency in [1e-4, 1], latency in [1e-3, 1e6] us."""
    band_key = "network_bandwidth_gbps" if across else "intra_node_bandwidth_gbps"
    lat_key = "network_latency_us" if across else "intra_node_latency_us"
    eff_key = "network" if across else "intra_node"
    rows = [(LINK_OPS[op], comm.Group(size=n, per_node=per_node if not across else 1), b, t) for op, n, b, t in points if op in LINK_OPS]

    def residual(x: np.ndarray) -> np.ndarray:
        spec = base.model_copy(update={
            band_key: bandwidth_gbps, lat_key: float(np.exp(x[1])),
            "efficiency": base.efficiency.model_copy(update={eff_key: float(np.exp(x[0]))}),
        })
        return np.array([np.log(fn(spec, group, nbytes)) - np.log(seconds) for fn, group, nbytes, seconds in rows])

    fit = least_squares(residual, [np.log(0.5), np.log(10.0)], bounds=([np.log(1e-4), np.log(1e-3)], [0.0, np.log(1e6)]),
                        loss="soft_l1", f_scale=0.1, diff_step=1e-3)
    return float(np.exp(fit.x[0])), float(np.exp(fit.x[1]))


def memory_numbers(gbps: list[float], datasheet_gbps: float | None) -> tuple[float, float]:
    """(bandwidth GB/s, memory efficiency): the datasheet and the median measured over it, or without
    a datasheet the best measured rate and the median over that."""
    best = datasheet_gbps or max(gbps)
    return best, min(1.0, statistics.median(gbps) / best)
