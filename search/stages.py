"""Contiguous split of the layer list into pipeline stages, with each stage's recomputation.

For one chunk per rank (vpp = 1) a dynamic program over (stage, first layer) keeps, for the stages
that remain, the Pareto front of (slowest stage time, sum of stage times): the 1F1B/GPipe step is
(m − 1)·max + Σ of per-stage micro-batch times (``costmodel.pipeline``), so the fronts hold its exact
optimum. Stage boundaries range over a window around the balanced split (the whole range for short
models); for longer models :func:`split_within` then searches every split that can beat the best one
the window found, which memory may push far from the balanced split (the ranks that hold the most
in-flight micro-batches take the fewest layers). Interleaved splits (vpp > 1) tie several chunks to
one rank: all splits are enumerated when few, otherwise the balanced split is improved by moving one
boundary at a time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from costmodel.specs import ParallelConfig
from costmodel.step import local_config
from costmodel.table import CostTable
from search.recompute import best_recompute
from search.stage_model import GroupCosts, stage_budget

FULL_RANGE_LAYERS = 40
"""Models with at most this many layers search every boundary; longer ones a window."""
WINDOW = 4
"""Boundary window (layers either side of the balanced split) for longer models."""
MAX_ENUMERATED_SPLITS = 3000
SMALL_SPLITS = 64
"""Splits few enough to hand every one to the cost model (vpp = 1)."""
FRONT_LIMIT = 8
EXACT_WORK = 40_000
"""Stage evaluations :func:`split_within` may spend (beyond that the window search stands)."""
CAP_TOLERANCE = 1e-9
"""Relative slack on :func:`split_within`'s cap, erring towards searching more."""


@dataclass(frozen=True)
class StagePlan:
    """A split (layers per chunk) and each layer's recomputation, with the split's objective."""

    sizes: tuple[int, ...]
    layer_recompute: tuple[str, ...]
    objective_s: float


StageFn = Callable[[int, int, int], "tuple[float, np.ndarray] | None"]


def _group_prefix(table: CostTable) -> np.ndarray:
    n, g = len(table.layer_group), len(table.groups)
    cum = np.zeros((n + 1, g))
    cum[np.arange(1, n + 1), table.layer_group] = 1.0
    return np.cumsum(cum, axis=0)


def stage_evaluator(table: CostTable, cfg: ParallelConfig, gc: GroupCosts, modes: tuple[int, ...] | None) -> StageFn:
    """f(rank, start, end) -> (time per micro-batch, choice) for a one-chunk rank, memoised."""
    prefix = _group_prefix(table)
    tokens = local_config(table, cfg, "none").tokens
    memo: dict[tuple[int, int, int], tuple[float, np.ndarray] | None] = {}

    def evaluate(rank: int, start: int, end: int):
        key = (rank, start, end)
        if key not in memo:
            counts = prefix[end] - prefix[start]
            boundary = _boundary(table, gc, end, tokens) if end > start else 0.0
            budget = stage_budget(table, cfg, gc, counts, rank, boundary)
            memo[key] = best_recompute(gc, counts, budget, modes)
        return memo[key]

    return evaluate


def _boundary(table: CostTable, gc: GroupCosts, end: int, tokens: float) -> float:
    """Bytes a chunk ending before layer ``end`` sends: its last layer's output plus the edges that
    span the cut (``CostTable.cut_extra_bytes_per_token``)."""
    return float(gc.out_bytes[table.layer_group[end - 1]]) + float(table.cut_extra_bytes_per_token[end - 1]) * tokens


def _windows(n: int, chunks: int, balanced: tuple[int, ...]) -> list[range]:
    """Allowed start index of each chunk."""
    starts = np.concatenate([[0], np.cumsum(balanced)[:-1]]).astype(int)
    if n <= FULL_RANGE_LAYERS:
        return [range(0, 1)] + [range(k, n - chunks + k + 1) for k in range(1, chunks)]
    return [range(0, 1)] + [range(max(k, s - WINDOW), min(n - chunks + k, s + WINDOW) + 1) for k, s in enumerate(starts) if k]


def split_one_chunk(table: CostTable, cfg: ParallelConfig, f: StageFn, balanced: tuple[int, ...]) -> list[StagePlan]:
    """Best splits for vpp = 1, best objective first: every split when there are at most
    ``SMALL_SPLITS`` (the cost model then ranks them on what the objective leaves out: gradient
    reduction, optimizer and pipeline transfers per rank), else the Pareto dynamic program."""
    n, p, m = len(table.layer_group), cfg.pp, cfg.num_microbatches
    if math.comb(n - 1, p - 1) <= SMALL_SPLITS:
        return _every_split(table, f, n, p, m)
    return _front_dp(table, f, _windows(n, p, balanced) + [range(n, n + 1)], m, lambda start: n)[0]


def split_within(table: CostTable, cfg: ParallelConfig, f: StageFn, fastest_s: np.ndarray, within_s: float) -> tuple[list[StagePlan] | None, int]:
    """(every split of objective at most ``within_s``, best first, or None when that takes more than
    ``EXACT_WORK`` stage evaluations; the evaluations spent), vpp = 1, over all boundaries, not a
    window. ``fastest_s``: each layer's least time per micro-batch under any recomputation ``f`` may
    choose (``f``'s stage time is the sum of its layers' times in their chosen modes). The objective
    (m − 1)·max + Σ of stage times is at least (m − 1)·A + S for a stage whose layers' least times
    sum to A, S the least times of all layers, so no such split has a stage with
    A > (within_s − S)/(m − 1): each stage's first layer lies where the stages before it can reach
    and the stages after it can cover the rest under that cap (greedy reach, exact for contiguous
    cuts of non-negative times), and each stage ends within the cap."""
    n, p, m = len(table.layer_group), cfg.pp, cfg.num_microbatches
    cum = np.concatenate([[0.0], np.cumsum(fastest_s)])
    cap = (within_s * (1 + CAP_TOLERANCE) - cum[-1]) / (m - 1) if m > 1 else math.inf
    if cap < float(np.max(fastest_s)):
        return [], 0  # some layer alone exceeds it: no split is within
    ahead, behind = [0], [n]
    for _ in range(p):
        ahead.append(int(np.searchsorted(cum, cum[ahead[-1]] + cap, side="right")) - 1)
        behind.append(int(np.searchsorted(cum, cum[behind[-1]] - cap, side="left")))
    windows = [range(max(k, behind[p - k]), min(ahead[k], n - p + k) + 1) for k in range(p)] + [range(n, n + 1)]
    if any(len(w) == 0 for w in windows):
        return [], 0

    def longest(start: int) -> int:
        return int(np.searchsorted(cum, cum[start] + cap, side="right")) - 1

    work = sum(max(0, min(longest(a), windows[k + 1][-1]) - max(a, windows[k + 1][0] - 1)) for k in range(p) for a in windows[k])
    if work > EXACT_WORK:
        return None, 0
    return _front_dp(table, f, windows, m, longest)


def _front_dp(table: CostTable, f: StageFn, windows: list[range], m: int, longest: Callable[[int], int]) -> tuple[list[StagePlan], int]:
    """The Pareto dynamic program over (stage, first layer): stage s starts in ``windows[s]`` and
    ends at most at ``longest(start)``; (plans best first, stage evaluations)."""
    p, n = len(windows) - 1, windows[-1][0]
    # front[s][start]: entries (max, sum, end, choice, next entry) for stages s.. covering start..n-1
    front: list[dict[int, list]] = [dict() for _ in range(p + 1)]
    front[p][n] = [(0.0, 0.0, None, None, None)]
    work = 0
    for s in range(p - 1, -1, -1):
        for start in windows[s]:
            entries, last = [], longest(start)
            for end in windows[s + 1]:
                if end > last:
                    break
                if end <= start or end not in front[s + 1]:
                    continue
                work += 1
                got = f(s, start, end)
                if got is None:
                    continue
                for child in front[s + 1][end]:
                    entries.append((max(child[0], got[0]), child[1] + got[0], end, got[1], child))
            if entries:
                front[s][start] = _pareto(entries)
    return sorted((_unwind(table, e, m) for e in front[0].get(0, [])), key=lambda x: x.objective_s), work


def _every_split(table: CostTable, f: StageFn, n: int, p: int, m: int) -> list[StagePlan]:
    plans = []
    for cut in itertools.combinations(range(1, n), p - 1):
        bounds = (0,) + cut + (n,)
        stages = [f(s, a, b) for s, (a, b) in enumerate(zip(bounds, bounds[1:]))]
        if any(x is None for x in stages):
            continue
        times = [x[0] for x in stages]
        layers = [c for (a, b), x in zip(zip(bounds, bounds[1:]), stages) for c in _assign(table, range(a, b), x[1])]
        plans.append(StagePlan(tuple(b - a for a, b in zip(bounds, bounds[1:])), tuple(layers), (m - 1) * max(times) + sum(times)))
    return sorted(plans, key=lambda x: x.objective_s)


def _pareto(entries: list) -> list:
    entries.sort(key=lambda e: (e[0], e[1]))
    kept, best_sum = [], math.inf
    for e in entries:
        if e[1] < best_sum - 1e-15:
            kept.append(e)
            best_sum = e[1]
    return kept[:FRONT_LIMIT]


def _unwind(table: CostTable, entry: tuple, m: int) -> StagePlan:
    """Follow an entry's chain of next entries into a split and its per-layer recomputation."""
    objective = (m - 1) * entry[0] + entry[1]
    sizes, layers, start = [], [], 0
    while entry[2] is not None:
        _, _, end, choice, entry = entry
        sizes.append(end - start)
        layers += _assign(table, range(start, end), choice)
        start = end
    return StagePlan(tuple(sizes), tuple(layers), objective)


def _assign(table: CostTable, order, choice: np.ndarray) -> list[str]:
    """Per-layer recompute for the layers in ``order``: within each group, the first layers take
    full, then selective, then none (Megatron's block method recomputes a chunk's first layers)."""
    left = choice.copy()
    out = []
    for i in order:
        g = table.layer_group[i]
        c = next(k for k in (2, 1, 0) if left[g, k] >= 0.5)
        left[g, c] -= 1
        out.append(("none", "selective", "full")[c])
    return out


def split_interleaved(table: CostTable, cfg: ParallelConfig, gc: GroupCosts, modes, balanced: tuple[int, ...]) -> list[StagePlan]:
    """Splits for vpp > 1: every split when few, else the balanced one and single-boundary moves."""
    n, chunks = len(table.layer_group), cfg.pp * cfg.vpp
    if math.comb(n - 1, chunks - 1) <= MAX_ENUMERATED_SPLITS:
        candidates = [tuple(b - a for a, b in zip((0,) + cut, cut + (n,))) for cut in itertools.combinations(range(1, n), chunks - 1)]
    else:
        candidates = [balanced] + _one_moves(balanced)  # local moves: not exhaustive
    plans = [p for p in (_interleaved_plan(table, cfg, gc, modes, sizes) for sizes in candidates) if p is not None]
    return sorted(plans, key=lambda x: x.objective_s)


def _one_moves(sizes: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Move the first or the last boundary by one layer (where the embedding and the head make
    chunks unequal)."""
    out = []
    for k in sorted({0, len(sizes) - 2}):
        for d in (-1, 1):
            new = list(sizes)
            new[k] += d
            new[k + 1] -= d
            if min(new) > 0:
                out.append(tuple(new))
    return out


def _interleaved_plan(table, cfg, gc, modes, sizes) -> StagePlan | None:
    prefix = _group_prefix(table)
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    times, layers = [], [""] * len(table.layer_group)
    for rank in range(cfg.pp):
        idx = list(range(rank, len(sizes), cfg.pp))
        counts = sum(prefix[bounds[k + 1]] - prefix[bounds[k]] for k in idx)
        tokens = local_config(table, cfg, "none").tokens
        boundary = max(_boundary(table, gc, bounds[k + 1], tokens) for k in idx)
        got = best_recompute(gc, counts, stage_budget(table, cfg, gc, counts, rank, boundary), modes)
        if got is None:
            return None
        times.append(got[0])
        order = [i for k in idx for i in range(bounds[k], bounds[k + 1])]
        for i, choice in zip(order, _assign(table, order, got[1])):
            layers[i] = choice
    slowest = max(times)
    objective = cfg.num_microbatches * slowest + (sum(times) - slowest) / cfg.vpp
    return StagePlan(tuple(int(x) for x in sizes), tuple(layers), objective)
