"""How much of the HBM bandwidth one decode kernel reaches, by the bytes it moves.

A kernel that streams little data spends a larger share of its time ramping up and draining
(too few bytes in flight to cover the DRAM latency), so small transfers run below the streaming
rate. Calculon (Isaev et al., "Calculon: a Methodology and Tool for High-Level Codesign of Systems
and Large Language Models", SC'23; its systems/*.json memory tables, costmodel-notes §1.3) prices
HBM traffic at 0.90 of peak for transfers of 100 MB and more, 0.75 from 10 MB, 0.60 from 1 MB and
0.30 below; decode kernels sit right in that range (a 70B layer's GEMM at tp 8 reads ~27 MB).
"""

from __future__ import annotations

import math

CALCULON_HBM = ((1e5, 0.30), (1e6, 0.60), (1e7, 0.75), (1e8, 0.90))
"""(bytes, fraction of peak) of Calculon's HBM table; between the points the fraction is
interpolated in log(bytes) [assumption: the table's steps smoothed so that the cost is continuous]."""
DENSE_WEIGHT_GEMMS = 4
"""Weight GEMMs a block's dense part splits into (QKV, output projection, gate-up, down)."""
EXPERT_GEMMS = 2
"""Grouped GEMMs of the routed experts (gate-up, down)."""


def calculon_fraction(nbytes: float) -> float:
    """Calculon's HBM fraction for one transfer of ``nbytes``."""
    if nbytes <= CALCULON_HBM[0][0]:
        return CALCULON_HBM[0][1]
    for (lo, f_lo), (hi, f_hi) in zip(CALCULON_HBM, CALCULON_HBM[1:]):
        if nbytes <= hi:
            t = math.log(nbytes / lo) / math.log(hi / lo)
            return f_lo + t * (f_hi - f_lo)
    return CALCULON_HBM[-1][1]


def transfer_scale(nbytes: float) -> float:
    """A kernel's bandwidth relative to a large stream's: Calculon's fraction at ``nbytes`` over
    its fraction for >= 100 MB (the fitted ``ServingEfficiency`` fractions are the large-stream ones)."""
    return calculon_fraction(nbytes) / CALCULON_HBM[-1][1]


def stream_seconds(nbytes: float, kernels: int, bandwidth: float) -> float:
    """Seconds to stream ``nbytes`` split evenly over ``kernels`` kernels at ``bandwidth`` B/s (a
    large stream's rate), each kernel at the rate its own transfer size allows."""
    if nbytes <= 0:
        return 0.0
    return nbytes / (bandwidth * transfer_scale(nbytes / max(kernels, 1)))


def expert_stream_rate(dense_rate: float, peak: float, moe_fraction: float | None) -> float:
    """Bytes/s at which a decode step's fused MoE streams its routed experts' weights: the dense
    stream rate, or the engine's measured MoE rate (``moe_fraction`` of the HBM ``peak``,
    ``LowPrecisionRates.moe_stream_fraction``: AMD aiter's tuned block-scaled FP8 MoE table) where
    that is lower."""
    return dense_rate if moe_fraction is None else min(dense_rate, peak * moe_fraction)
