"""The plan search: best-first branch and bound over the space, then stage-split refinement.

1. Enumerate every base option (mesh, micro-batch, schedule, SP, ZeRO; ``search.space``) and give
   each a lower bound on its step time over every stage split and recomputation: the pipeline
   formula applied to the sum of the fastest per-layer times (``bound_s``), computed lazily: a cheap
   bound for all, the full one and the memory bound only for options that reach the front of the
   queue (``search.frontier``; the order is the same as bounding everything).
2. Evaluate options in order of bound with uniform recomputation (none / selective / full, as the
   target and the option's schedule allow) until the bound passes the k-th best plan found:
   everything after cannot win (pruned, proven). A time-limited search evaluates a few seeds first;
   a seed the queue never reaches takes its full bound, not its queue key.
3. Refine the surviving options with the stage dynamic program and per-rank recomputation
   (``search.stages``, ``search.recompute``), re-evaluating each result with the cost model.
An option whose refinement searched every split (for long models, every split whose stage-DP
objective can beat the window's best: ``search.stages.split_within``) is closed; the optimality gap
is the distance from the best plan to the lowest bound still open. A time limit stops either phase
(anytime: the best plan so far, with its gap).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig
from costmodel.memory import GIB
from costmodel.step import estimate_step
from costmodel.table import RECOMPUTE_CODES, CostTable, build_cost_table
from search.bounds import compute_floor_s
from search.constraints import closest_unconstrained, describe, option_summary, recompute_modes
from search.refine import refine
from search.space import Option, meshes, options
from search.targets import native_zb_modes, rules_for
from search.types import Candidate, SearchRequest, SearchResult, SearchStats
from search.frontier import Frontier
from search.pool import Pool

Progress = Callable[[int, int], None]
NEAREST_MISS_TRIES = 16
"""Options evaluated to name the nearest miss when every option is over memory."""
DEADLINE_SHARE = 0.92
"""Share of ``--time-limit`` the search works for; the rest covers the last refinement's overrun
and assembling the result, so that the whole call stays within the limit."""
BOUNDS_SHARE = 0.6
"""Share of ``--time-limit`` the quick bounds of every option may take before options are evaluated."""
SEEDS = 8
"""Options a time-limited search evaluates before the best-first order (``Frontier.seeds``: sampled
across the space and from the lowest quick bounds, those that fit in memory), so that a short limit
still returns a plan."""
MARGIN_RETRIES = 3
"""Refinements of an option again with memory kept free, when every split the stage summary proposed
is over memory in the cost model yet faster than the best plan (the summary steers; the cost model
decides): each keeps free the least overshoot found plus :data:`MARGIN_STEP_GIB`."""
MARGIN_STEP_GIB = 0.5
REFINE_WORK_LIMIT = 30_000
"""Stage evaluations the refinement may spend without a time limit (a deterministic budget, so that
the same inputs give the same plan; a time limit refines until it expires instead)."""


def search_plan(model: ModelSpec, cluster: ClusterSpec, req: SearchRequest, progress: Progress | None = None,
                table: CostTable | None = None) -> SearchResult:
    """Find the fastest configuration that fits (see module docstring).

    ``table``: a cost table of ``model`` on ``cluster`` to reuse across searches (``planner.capacity``
    shares one per model and cluster); its memos hold pure functions of their keys, so the result is
    the same as with a fresh table."""
    start = time.perf_counter()
    deadline = start + DEADLINE_SHARE * req.time_limit_s if req.time_limit_s else None
    table = table if table is not None and table.model is model and table.cluster is cluster else build_cost_table(model, cluster)
    every = _all_options(model, cluster, req)
    # Shared by every search on this table (planner.capacity reuses one table across GPU counts and
    # batches): a key must name all its value depends on besides the table, not only what varies
    # within one search.
    memo: dict = table.memo.setdefault("search.bounds", {})
    floor = compute_floor_s(model, cluster, req)
    frontier = Frontier(table, every, memo, floor, start + BOUNDS_SHARE * req.time_limit_s if req.time_limit_s else None)
    pool = Pool(req.top_k)
    timed_out, evaluated, opened = not frontier.complete, 0, []
    seeded: dict[int, int] = {}  # option index -> its place in opened
    for bound, i, option in frontier.seeds(SEEDS) if deadline else ():  # an early incumbent for an anytime search
        seeded[i] = len(opened)
        opened.append(_open(table, req, pool, bound, option))
    while (front := frontier.peek(deadline)) is not None:
        bound, i, option = front
        if pool.cutoff_s() <= bound:
            break
        if deadline and time.perf_counter() > deadline:
            timed_out = True
            break
        frontier.take()
        if i in seeded:  # evaluated already: keep its full bound, tighter than the seed's key
            opened[seeded[i]] = (bound,) + opened[seeded[i]][1:]
            del seeded[i]
        else:
            opened.append(_open(table, req, pool, bound, option))
        if progress:
            progress(len(opened), len(every))
    for i, place in seeded.items():  # seeds the queue never reached: their full bound, not the seed's key
        opened[place] = (max(opened[place][0], frontier.full_bound_s(i)),) + opened[place][1:]
    evaluated = sum(len(_modes(req, base)) for _, base, _ in opened)
    open_bounds, refined = _refine_all(table, req, pool, sorted(opened, key=lambda o: (o[2], o[0])), deadline)
    timed_out = timed_out or refined < len(opened) and bool(deadline and time.perf_counter() > deadline)
    unexplored = frontier.lowest_s()
    if pool.best() is None:
        evaluated += _nearest_misses(table, pool, every, frontier.memory_order(),
                                     _modes(req)[-1])
    pruned = len(every) - len(opened)
    hints = _unsatisfiable(model, cluster, req) if not every and req.constraints else ()
    return _result(pool, req, evaluated + refined, pruned, open_bounds + ([] if unexplored is None else [unexplored]), timed_out, start, hints)


def _open(table: CostTable, req: SearchRequest, pool: Pool, bound: float, option: Option) -> tuple[float, ParallelConfig, float]:
    """Evaluate ``option`` under each uniform recomputation the request allows; (its bound, its
    configuration, its fastest fitting uniform step)."""
    base = option.to_config()
    uniform = math.inf
    for mode in _modes(req, base):
        cfg = base.model_copy(update={"recompute": mode})
        cand = Candidate(cfg, estimate_step(table, cfg))
        pool.add(cand)
        if cand.fits:
            uniform = min(uniform, cand.step_time_s)
    return bound, base, uniform


def _modes(req: SearchRequest, base: ParallelConfig | None = None) -> tuple[str, ...]:
    """The uniform recomputation modes the request's constraints and its target's engine allow (for
    ``base``'s schedule: no selective recomputation under the native ZB-H1 pipeline,
    ``search.targets.native_zb_modes``)."""
    rules = rules_for(req.target)
    modes = recompute_modes(req.constraints, rules.recompute_modes)
    zb = native_zb_modes(rules, base.schedule, base.pp) if base is not None else None
    return modes if zb is None else tuple(m for m in modes if (RECOMPUTE_CODES.index(m),) in zb)


def _unsatisfiable(model: ModelSpec, cluster: ClusterSpec, req: SearchRequest) -> tuple[str, ...]:
    """Why no configuration satisfies the constraints: the closest one of the unconstrained space."""
    closest = closest_unconstrained(model, cluster, req)
    if closest is None:
        return ("no configuration of the space applies, even without constraints: check the GPU count and batch",)
    option, broken = closest
    return (f"no configuration satisfies the constraints ({describe(req.constraints)}); nearest: {option_summary(option)}, "
            f"which has {', '.join(broken)}",)


def _nearest_misses(table: CostTable, pool: Pool, every: list[Option], memory_order: list[int], mode: str) -> int:
    """When nothing fits, evaluate the options with the smallest memory bound under ``mode`` (full
    recomputation unless constrained), so that the nearest miss and its shortfall can be reported."""
    closest = memory_order[:NEAREST_MISS_TRIES]
    for i in closest:
        cfg = every[i].to_config().model_copy(update={"recompute": mode})
        pool.add(Candidate(cfg, estimate_step(table, cfg)))
    return len(closest)


def _all_options(model: ModelSpec, cluster: ClusterSpec, req: SearchRequest) -> list[Option]:
    return [cfg for mesh in meshes(model, cluster, req) for cfg in options(model, cluster, mesh, req)]


def _refine_all(table: CostTable, req: SearchRequest, pool: Pool, opened: list, deadline: float | None) -> tuple[list[float], int]:
    """Refine opened options, most promising first (fastest uniform plan), while their bound says
    they can still win; without a time limit within ``REFINE_WORK_LIMIT``. Return the bounds left
    open (not closed by an exhaustive refinement) and how many refinements ran."""
    rules = rules_for(req.target)
    open_bounds, count, work, longest = [], 0, 0, 0.0
    if not req.nonuniform:
        return [b for b, _, _ in opened if b < pool.best_s()], 0
    for bound, base, _ in opened:
        if pool.best_s() <= bound:
            continue
        began = time.perf_counter()
        out_of_time = deadline is not None and began + longest > deadline
        if out_of_time or (deadline is None and work >= REFINE_WORK_LIMIT):
            open_bounds.append(bound)
            continue
        exhaustive, margin = True, 0.0
        for attempt in range(MARGIN_RETRIES + 1):
            candidates, searched, spent = refine(table, base, rules, req.constraints.recompute, req.target, margin)
            exhaustive = searched if attempt == 0 else exhaustive
            count += 1
            work += spent
            priced = [Candidate(cfg, estimate_step(table, cfg)) for cfg in candidates]
            for cand in priced:
                pool.add(cand)
            over = [c for c in priced if not c.fits and c.step_time_s < pool.best_s()]
            if not over or any(c.fits for c in priced):
                break
            margin += (min(c.estimate.over_by_gib for c in over) + MARGIN_STEP_GIB) * GIB
        longest = max(longest, time.perf_counter() - began)
        if not exhaustive:
            open_bounds.append(bound)
    return open_bounds, count


def _result(pool: Pool, req: SearchRequest, evaluated: int, pruned: int, open_bounds: list[float], timed_out: bool, start: float,
            hints: tuple[str, ...] = ()) -> SearchResult:
    best = pool.best()
    lowest_open = min(open_bounds, default=None)
    if best is None or lowest_open is None or lowest_open >= best.step_time_s:
        gap = 0.0
    else:
        gap = float((best.step_time_s - lowest_open) / best.step_time_s)
    status = "timeout" if timed_out else ("optimal" if gap == 0.0 else "feasible")
    import pulp

    solver = "dp+ilp (pulp/highs)" if pulp.HiGHS().available() else "dp+ilp (pulp/cbc)"
    stats = SearchStats(evaluated, pruned, solver, status, gap, time.perf_counter() - start)
    if best is None:
        miss = pool.nearest_miss()
        hints = hints or pool.hints(miss, req)
        if timed_out and miss is not None:
            hints = ("a longer --time-limit (the search stopped before it tried every option)",) + hints
        return SearchResult(None, (), stats, miss, hints)
    return SearchResult(best, pool.runners_up(), stats)
