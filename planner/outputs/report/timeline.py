"""A pipeline timeline for the report: the first micro-batches of the plan's schedule, simulated.

Operation order per pipeline rank follows the schedules the cost model prices
(``costmodel.pipeline``): GPipe runs every forward then every backward; 1F1B (Narayanan et al. 2021
§2.2) warms up with pp - r - 1 forwards, then alternates one forward and one backward; interleaved
1F1B follows Megatron-LM's ``schedules.py`` (warm-up (pp - r - 1)·2 + (v - 1)·pp chunk forwards,
model chunk of the k-th forward (k mod pp·v) // pp, of the k-th backward v - 1 minus that). ZB-H1 is
drawn as 1F1B. Stage s = chunk·pp + rank; a forward waits for the previous stage's forward of the
same micro-batch, a backward for the next stage's backward (the last stage's for its own forward).
Durations: a forward takes ``FORWARD_SHARE`` of the rank's per-micro-batch time (divided over its
chunks), the backward the rest (backward ≈ 2 x forward, recomputation and exposed communication
folded in).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FORWARD_SHARE = 1.0 / 3.0
"""Forward share of forward + backward (backward does two GEMMs per forward GEMM)."""
Kind = Literal["F", "B"]


@dataclass(frozen=True)
class Op:
    """One forward or backward pass of one micro-batch through one model chunk."""

    rank: int
    kind: Kind
    microbatch: int
    chunk: int
    start: float
    end: float


def shown_microbatches(schedule: str, pp: int, num_microbatches: int) -> int:
    """How many micro-batches to draw: two per pipeline rank (a full warm-up, steady state and
    cool-down), a multiple of pp for interleaving."""
    if schedule == "interleaved-1f1b":
        return pp * max(1, min(num_microbatches // pp, 2))
    return min(num_microbatches, 2 * pp)


def rank_order(schedule: str, rank: int, pp: int, vpp: int, m: int) -> list[tuple[Kind, int, int]]:
    """(kind, micro-batch, chunk) in the order ``rank`` runs them."""
    if schedule == "gpipe":
        return [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
    if schedule == "interleaved-1f1b" and vpp > 1:
        return _interleaved(rank, pp, vpp, m)
    warm = min(pp - rank - 1, m)
    ops: list[tuple[Kind, int, int]] = [("F", i, 0) for i in range(warm)]
    for i in range(m - warm):
        ops += [("F", warm + i, 0), ("B", i, 0)]
    return ops + [("B", i, 0) for i in range(m - warm, m)]


def _interleaved(rank: int, pp: int, vpp: int, m: int) -> list[tuple[Kind, int, int]]:
    total = m * vpp
    warm = min((pp - rank - 1) * 2 + (vpp - 1) * pp, total)

    def op(kind: Kind, k: int) -> tuple[Kind, int, int]:
        chunk = (k % (pp * vpp)) // pp
        return kind, (k // (pp * vpp)) * pp + k % pp, chunk if kind == "F" else vpp - 1 - chunk

    ops = [op("F", k) for k in range(warm)]
    for j in range(total - warm):
        ops += [op("F", warm + j), op("B", j)]
    return ops + [op("B", k) for k in range(total - warm, total)]


def simulate(schedule: str, rank_times_s: list[float], vpp: int, m: int) -> list[Op]:
    """Start and end of every operation, each rank running its order as soon as inputs are ready."""
    pp = len(rank_times_s)
    orders = [rank_order(schedule, r, pp, vpp, m) for r in range(pp)]
    chunks = vpp if schedule == "interleaved-1f1b" else 1
    last_stage = chunks * pp - 1
    done: dict[tuple[Kind, int, int], float] = {}
    free, nxt, ops = [0.0] * pp, [0] * pp, []
    progress = True
    while progress:
        progress = False
        for r in range(pp):
            while nxt[r] < len(orders[r]):
                kind, mb, chunk = orders[r][nxt[r]]
                stage = chunk * pp + r
                dep = (("F", mb, stage - 1) if stage > 0 else None) if kind == "F" else (("B", mb, stage + 1) if stage < last_stage else ("F", mb, stage))
                if dep is not None and dep not in done:
                    break
                share = FORWARD_SHARE if kind == "F" else 1 - FORWARD_SHARE
                start = max(free[r], done[dep] if dep is not None else 0.0)
                end = start + share * rank_times_s[r] / chunks
                done[(kind, mb, stage)] = free[r] = end
                ops.append(Op(r, kind, mb, chunk, start, end))
                nxt[r] += 1
                progress = True
    if any(nxt[r] < len(orders[r]) for r in range(pp)):
        raise RuntimeError(f"schedule {schedule} deadlocked in the timeline simulation")
    return ops
