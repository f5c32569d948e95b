"""Refinement of one base option: a non-uniform stage split and per-layer (or per-job)
recomputation, as the target allows (``search.targets``)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from costmodel.specs import ParallelConfig
from costmodel.table import RECOMPUTE_CODES, CostTable
from search.stage_model import GroupCosts, group_costs
from search.stages import (
    FULL_RANGE_LAYERS, MAX_ENUMERATED_SPLITS, SMALL_SPLITS, WINDOW, StageFn, StagePlan, split_interleaved, split_one_chunk, split_within,
    stage_evaluator,
)
from search.targets import TargetRules, forbidden_cuts, native_zb_modes

KEEP = 3
"""Best splits per option re-evaluated by the cost model."""


def refine(table: CostTable, base: ParallelConfig, rules: TargetRules, recompute: str | None = None,
           target: str = "native", margin_bytes: float = 0.0) -> tuple[list[ParallelConfig], bool, int]:
    """(configurations to evaluate, whether every split was searched, stage evaluations spent: the
    share of the refinement budget) for ``base``; ``recompute``,
    when the user fixed it, is the one mode every recomputable layer takes. Splits with a boundary
    ``target`` cannot express (``search.targets.forbidden_cuts``) are never proposed. ``margin_bytes``:
    memory every rank keeps free beyond the stage summary's (``search.stage_model.GroupCosts``)."""
    if not rules.explicit_splits and (rules.recompute != "per_layer" or recompute):
        return [], True, 0
    gc = group_costs(table, base, margin_bytes)
    balanced = table.default_split(base.pp * base.vpp)
    if recompute:
        mode_sets: list = [(RECOMPUTE_CODES.index(recompute),)]
    else:
        mode_sets = [None] if rules.recompute == "per_layer" else [(RECOMPUTE_CODES.index(m),) for m in rules.recompute_modes]
        mode_sets = native_zb_modes(rules, base.schedule, base.pp) or mode_sets
    cuts = forbidden_cuts(target, table.model)
    plans: list[StagePlan] = []
    limit = None if _few_splits(table, base) else KEEP
    evaluators = []
    for modes in mode_sets:
        if base.vpp == 1:
            evaluators.append((modes, _without_cuts(stage_evaluator(table, base, gc, modes), cuts)))
            plans += split_one_chunk(table, base, evaluators[-1][1], balanced)[:limit]
        else:
            plans += [p for p in split_interleaved(table, base, gc, modes, balanced) if not _cuts_at(p.sizes, cuts)][:limit]
    searched, work = _exhaustive(table, base), refine_work(table, base)
    if not searched and base.vpp == 1:  # the window missed splits: search all that can beat its best
        more, searched, extra = _within(table, base, gc, evaluators, plans)
        plans, work = plans + more, work + extra
    plans.sort(key=lambda p: p.objective_s)
    keep = plans[:limit]
    configs = [_config(base, p) for p in keep]
    if rules.recompute == "block" and not recompute:
        for sizes in dict.fromkeys(p.sizes for p in keep):
            configs += _block_variants(base, sizes, table)
    return configs, searched, work


def _within(table: CostTable, base: ParallelConfig, gc: GroupCosts, evaluators: list, plans: list[StagePlan]) -> tuple[list[StagePlan], bool, int]:
    """(the best splits of every boundary, not a window, that can beat ``plans``' best, per mode
    set; whether each mode set's search was complete; stage evaluations) with
    :func:`search.stages.split_within`, each mode set's best tightening the next one's cap."""
    best = min((p.objective_s for p in plans), default=math.inf)
    found: list[StagePlan] = []
    work = 0
    for modes, f in evaluators:
        got, spent = split_within(table, base, f, _fastest(table, gc, modes), best)
        work += spent
        if got is None:
            return found, False, work
        found += got[:KEEP]
        best = min([best] + [p.objective_s for p in got])
    return found, True, work


def _fastest(table: CostTable, gc: GroupCosts, modes: tuple[int, ...] | None) -> np.ndarray:
    """Each layer's least time per micro-batch under the recomputation ``modes`` allow (all when
    None; layers that cannot recompute take their one time)."""
    cols = list(modes) if modes is not None else list(range(gc.time_s.shape[1]))
    per_group = np.where(gc.recomputable, gc.time_s[:, cols].min(axis=1), gc.time_s[:, 0])
    return per_group[table.layer_group]


def _without_cuts(f: StageFn, cuts: frozenset[int]) -> StageFn:
    """``f`` with every chunk that ends right before a forbidden boundary infeasible."""
    if not cuts:
        return f
    return lambda rank, start, end: None if end in cuts else f(rank, start, end)


def _cuts_at(sizes: tuple[int, ...], cuts: frozenset[int]) -> bool:
    """Whether a split has a boundary in ``cuts``."""
    return bool(cuts.intersection(itertools.accumulate(sizes[:-1])))


def refine_work(table: CostTable, base: ParallelConfig) -> int:
    """Stage evaluations :func:`refine` spends on ``base`` (its share of the refinement budget)."""
    n, chunks = len(table.layer_group), base.pp * base.vpp
    if _few_splits(table, base):
        return math.comb(n - 1, chunks - 1) * chunks
    if base.vpp > 1:
        return (1 + 2 * 2) * base.pp
    span = n if n <= FULL_RANGE_LAYERS else 2 * WINDOW + 1
    return base.pp * span * span


def _few_splits(table: CostTable, base: ParallelConfig) -> bool:
    n, chunks = len(table.layer_group), base.pp * base.vpp
    return math.comb(n - 1, chunks - 1) <= SMALL_SPLITS


def _config(base: ParallelConfig, plan: StagePlan) -> ParallelConfig:
    """``base`` with the plan's split and recomputation (one mode for all layers when it is one)."""
    modes = set(plan.layer_recompute)
    if len(modes) == 1:
        return base.model_copy(update={"stage_layers": plan.sizes, "recompute": modes.pop()})
    return base.model_copy(update={"stage_layers": plan.sizes, "layer_recompute": plan.layer_recompute, "recompute": "none"})


def _block_variants(base: ParallelConfig, sizes: tuple[int, ...], table: CostTable) -> list[ParallelConfig]:
    """Megatron's ``--recompute-method block --recompute-num-layers N``: full recomputation of the
    first N recomputable layers of every chunk, the others none."""
    bounds = [0]
    for s in sizes:
        bounds.append(bounds[-1] + s)
    out = []
    for n in range(1, max(sizes) + 1):
        layers = ["none"] * len(table.layer_group)
        for a, b in zip(bounds, bounds[1:]):
            movable = [i for i in range(a, b) if table.recomputable[i]][:n]
            for i in movable:
                layers[i] = "full"
        out.append(base.model_copy(update={"stage_layers": sizes, "layer_recompute": tuple(layers), "recompute": "none"}))
    return out


def _exhaustive(table: CostTable, base: ParallelConfig) -> bool:
    """Whether :func:`refine`'s first pass searched every split: one chunk has one split (its
    recomputation is solved exactly), longer models search a window of boundaries (then
    :func:`_within` the rest), interleaving enumerates few splits."""
    n = len(table.layer_group)
    if base.pp * base.vpp == 1:
        return True
    if base.vpp == 1:
        return n <= FULL_RANGE_LAYERS
    return math.comb(n - 1, base.pp * base.vpp - 1) <= MAX_ENUMERATED_SPLITS
