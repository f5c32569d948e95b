"""The refinement of a long model's one-chunk options (``search.refine``, ``search.stages.split_within``):
every split that can beat the window's best is searched, so memory may push the split far from the
balanced one and the option still closes.

The case: 60 blocks (63 layers, more than ``FULL_RANGE_LAYERS``, so the first pass searches a window
of ``WINDOW`` boundaries around the balanced split) on 8 ZB-H1 ranks of 6 GiB GPUs. ZB-H1 on the
native runtime takes one recomputation mode for every layer, none or full; with none, rank 0 holds 8
micro-batches in flight and takes at most 6 layers where the balanced split gives it 9, so the only
splits without recomputation lie 5-6 layers from the balanced boundaries, outside the window. Before
``split_within`` the refinement returned fully recomputed splits only and left the option open
(feasible, gap 9.6 %)."""

from __future__ import annotations

import itertools
import math

import pytest

from costmodel.specs import ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from search.core import search_plan
from search.refine import refine
from search.stage_model import group_costs
from search.stages import WINDOW, split_one_chunk, split_within, stage_evaluator
from search.targets import rules_for
from search.types import Constraints, SearchRequest
from tests.search.test_search_parts import tiny_cluster, tiny_model

NONE, FULL = (0,), (2,)


def _case(layers: int = 60, pp: int = 8, hbm_gib: float = 6.0):
    table = build_cost_table(tiny_model(layers=layers), tiny_cluster(hbm_gib))
    cfg = ParallelConfig(pp=pp, dp=1, micro_batch=1, global_batch=16, seq_len=2048, schedule="zb-h1", engine="native")
    return table, cfg


def _window_best_s(table, cfg) -> float:
    """The cost model's best over what the window alone proposes (the refinement before the fix)."""
    gc = group_costs(table, cfg)
    steps = []
    for modes in (NONE, FULL):
        for plan in split_one_chunk(table, cfg, stage_evaluator(table, cfg, gc, modes), table.default_split(cfg.pp)):
            layers = set(plan.layer_recompute)
            update = {"stage_layers": plan.sizes, "recompute": layers.pop()} if len(layers) == 1 else \
                {"stage_layers": plan.sizes, "layer_recompute": plan.layer_recompute}
            est = estimate_step(table, cfg.model_copy(update=update))
            steps.append(est.step_time_s if est.fits else math.inf)
    return min(steps)


def test_refinement_searches_past_the_window_and_closes_the_option() -> None:
    table, cfg = _case()
    configs, searched, _ = refine(table, cfg, rules_for("native"))
    assert searched  # every split that can beat the window's best was searched
    fitting = [(est.step_time_s, c) for c in configs if (est := estimate_step(table, c)).fits]
    step, best = min(fitting, key=lambda x: x[0])
    assert best.recompute == "none" and not best.layer_recompute  # no recomputation at all
    balanced = list(itertools.accumulate(table.default_split(cfg.pp)))
    found = list(itertools.accumulate(best.stage_layers))
    assert max(abs(a - b) for a, b in zip(balanced, found)) > WINDOW  # outside the first pass's window
    assert step < _window_best_s(table, cfg) * 0.95


def test_split_within_finds_the_optimum_of_every_split() -> None:
    """Against brute force over every split of 51 layers into 3 stages (memory binds: the best split
    is not the unconstrained one), with the cap at the optimum itself (the tightest ``within_s`` that
    must still find it) and with no cap."""
    table, cfg = _case(layers=48, pp=3, hbm_gib=8.0)
    cfg = cfg.model_copy(update={"global_batch": 6})
    f = stage_evaluator(table, cfg, group_costs(table, cfg), NONE)
    n, m = len(table.layer_group), cfg.num_microbatches
    best = math.inf
    for cut in itertools.combinations(range(1, n), 2):
        bounds = (0,) + cut + (n,)
        stages = [f(s, a, b) for s, (a, b) in enumerate(zip(bounds, bounds[1:]))]
        if all(x is not None for x in stages):
            times = [x[0] for x in stages]
            best = min(best, (m - 1) * max(times) + sum(times))
    assert best < math.inf
    gc = group_costs(table, cfg)
    fastest = gc.time_s[:, 0][table.layer_group]
    for within in (best, math.inf):
        plans, work = split_within(table, cfg, f, fastest, within)
        assert plans and plans[0].objective_s == pytest.approx(best, rel=1e-12) and work > 0
    plans, _ = split_within(table, cfg, f, fastest, best * 0.999)
    assert all(p.objective_s > best * 0.999 for p in plans)


def test_search_finds_the_split_memory_forces() -> None:
    req = SearchRequest(gpus=8, global_batch=16, seq_len=2048, constraints=Constraints(pp=(8, 8), schedule="zb-h1", micro_batch=(1, 1)))
    table, cfg = _case()
    result = search_plan(table.model, table.cluster, req, table=table)
    assert result.stats.status == "optimal" and result.stats.gap == 0.0
    assert result.best is not None and result.best.config.recompute == "none" and not result.best.config.layer_recompute
    assert result.best.step_time_s < _window_best_s(table, cfg) * 0.95
