"""Pipeline schedules: step time of a pipeline of stages with given per-micro-batch times.

Narayanan et al. 2021 §2.2: GPipe and 1F1B take (m + p − 1)·(t_f + t_b) for p equal stages (bubble
fraction (p − 1)/m); interleaving v chunks per rank shrinks the bubble to (p − 1)/(v·m). Unequal
stages generalise this to m·max_r X_r + (Σ_r X_r − max_r X_r)/v: the slowest rank runs every
micro-batch, the others add their fill and drain once. ZB-H1 (Qi et al., "Zero Bubble Pipeline
Parallelism", ICLR'24) fills the bubble with weight-gradient work: (p − 1)(T_F + T_B − T_W), a third
of 1F1B's when T_F = T_B = T_W.
"""

from __future__ import annotations

from collections.abc import Sequence

ZB_H1_BUBBLE_SHARE = 1.0 / 3.0
"""ZB-H1 bubble relative to 1F1B's when forward, input-gradient and weight-gradient times are equal."""


def pipeline_time(rank_times: Sequence[float], num_microbatches: int, vpp: int, schedule: str) -> tuple[float, float]:
    """(time of the pipelined micro-batches, of which bubble) for per-rank micro-batch times X_r."""
    return pipeline_time_folded(max(rank_times), sum(rank_times), num_microbatches, vpp, schedule)


def pipeline_time_folded(slowest: float, total: float, num_microbatches: int, vpp: int, schedule: str) -> tuple[float, float]:
    """:func:`pipeline_time` from the slowest rank's time and the sum over all ranks."""
    busy = num_microbatches * slowest
    bubble = (total - slowest) / (vpp if schedule == "interleaved-1f1b" else 1)
    if schedule == "zb-h1":
        bubble *= ZB_H1_BUBBLE_SHARE
    return busy + bubble, bubble


def bubble_fraction(pp: int, num_microbatches: int, vpp: int = 1, schedule: str = "1f1b") -> float:
    """Bubble time over ideal time for p equal stages: (p − 1)/(v·m) (Narayanan et al. eq. in §2.2)."""
    total, bubble = pipeline_time([1.0] * pp, num_microbatches, vpp, schedule)
    return bubble / (total - bubble)


def p2p_exposed(p2p_s: float, pp: int, num_microbatches: int, vpp: int, overlapped: bool) -> float:
    """Exposed pipeline send/receive time: the first micro-batch's hops through the pipeline and back
    (2(p − 1), the fill and drain) always sit on the critical path; in non-interleaved 1F1B each
    further micro-batch also waits on its exchange each way (Megatron ``schedules.py`` blocks on
    send/recv unless ``overlap_p2p_comm`` with interleaving): 2(m − 1) more. One micro-batch over two
    stages is one send forward and one back."""
    if pp == 1:
        return 0.0
    fill = 2 * (pp - 1) * p2p_s
    return fill if overlapped else fill + 2 * max(0, num_microbatches - 1) * p2p_s
