"""Per-layer activation recomputation of one pipeline rank: least time within its memory budget.

Layers of one group are identical, so a rank's choice is how many layers of each group take each
option (none / selective / full): a multiple-choice knapsack with tied items. One recomputable group
(the usual case: every block alike) is solved exactly in closed form per count of fully recomputed
layers; several groups (dense and MoE blocks, encoder and decoder) go to an integer program (PuLP;
HiGHS through highspy where present, CBC otherwise), laid out OR-Tools style: variables keyed by
(group, option), one function per constraint family, objective, solve, extract.
"""

from __future__ import annotations

import math

import numpy as np

from search.stage_model import GroupCosts, StageBudget

NONE, SELECTIVE, FULL = 0, 1, 2
_EPS = 1e-9


def best_recompute(gc: GroupCosts, counts: np.ndarray, budget: StageBudget, modes: tuple[int, ...] | None = None) -> tuple[float, np.ndarray] | None:
    """(time per micro-batch, layers per group and option) of the fastest choice that fits, or None.

    ``modes`` restricts every recomputable group to one shared option (engines that take one
    recompute mode per job); None allows any mix per layer.
    """
    movable = [g for g in np.flatnonzero(counts) if gc.recomputable[g]]
    if modes is not None:
        return _best_uniform(gc, counts, budget, movable, modes)
    if len(movable) <= 1:
        return _best_single(gc, counts, budget, movable)
    return _best_ilp(gc, counts, budget, movable)


def _fixed_choice(gc: GroupCosts, counts: np.ndarray) -> np.ndarray:
    choice = np.zeros(gc.time_s.shape)
    choice[:, NONE] = counts
    return choice


def evaluate(gc: GroupCosts, choice: np.ndarray, budget: StageBudget) -> float | None:
    """Time per micro-batch of ``choice``, or None when it does not fit the budget."""
    used = choice > 0
    work = float(gc.work_bytes[used].max()) if used.any() else 0.0
    if budget.flight * float((choice * gc.act_bytes).sum()) + work > budget.act_budget_bytes * (1 + _EPS):
        return None
    return float((choice * gc.time_s).sum())


def _best_uniform(gc, counts, budget, movable, modes) -> tuple[float, np.ndarray] | None:
    best = None
    for mode in modes:
        choice = _fixed_choice(gc, counts)
        for g in movable:
            choice[g] = 0.0
            choice[g, mode] = counts[g]
        time = evaluate(gc, choice, budget)
        if time is not None and (best is None or time < best[0] - _EPS):
            best = (time, choice)
    return best


def _best_single(gc, counts, budget, movable) -> tuple[float, np.ndarray] | None:
    """Closed form for one recomputable group: for each count k of fully recomputed layers, the
    fewest selective layers that fit, the rest not recomputed; keep the fastest. When selective
    recomputation saves no memory (FlashAttention already stores no s x s scores), only k varies and
    the fewest full layers that fit is optimal."""
    base = _fixed_choice(gc, counts)
    if not movable:
        time = evaluate(gc, base, budget)
        return None if time is None else (time, base)
    g = int(movable[0])
    n = int(counts[g])
    t, a, w = gc.time_s[g].tolist(), gc.act_bytes[g].tolist(), gc.work_bytes[g].tolist()
    other = base.copy()
    other[g] = 0.0
    used = other > 0
    other_act = budget.flight * float((other * gc.act_bytes).sum())
    other_work = float(gc.work_bytes[used].max()) if used.any() else 0.0
    other_time = float((other * gc.time_s).sum())
    room = budget.act_budget_bytes * (1 + _EPS) - other_act
    selective_helps = a[SELECTIVE] < a[NONE]
    best = None
    for k_full in range(n + 1):
        rest = n - k_full
        work = max(other_work, w[FULL] if k_full else 0.0, w[NONE] if rest else 0.0)
        need = budget.flight * (rest * a[NONE] + k_full * a[FULL]) + work - room
        k_sel = 0
        if need > 0:
            if not selective_helps:
                continue
            k_sel = math.ceil(need / (budget.flight * (a[NONE] - a[SELECTIVE])) - _EPS)
            if k_sel > rest:
                continue
        total = other_time + (rest - k_sel) * t[NONE] + k_sel * t[SELECTIVE] + k_full * t[FULL]
        if best is None or total < best[0] - _EPS * total:
            best = (total, (rest - k_sel, k_sel, k_full))
        if not selective_helps:
            break
    if best is None:
        return None
    choice = base.copy()
    choice[g] = best[1]
    return best[0], choice


def _best_ilp(gc, counts, budget, movable) -> tuple[float, np.ndarray] | None:
    """Several recomputable groups: an integer program over (group, option) counts."""
    import pulp

    prob = pulp.LpProblem("rank_recompute", pulp.LpMinimize)
    # Variables: layers of each group taking each option; whether a group has any full recompute.
    x = {(g, c): prob.add_variable(f"x_{g}_{c}", 0, int(counts[g]), cat="Integer") for g in movable for c in (NONE, SELECTIVE, FULL)}
    any_full = {g: prob.add_variable(f"full_{g}", cat="Binary") for g in movable}
    work = prob.add_variable("work", 0)
    fixed = _fixed_choice(gc, counts)
    for g in movable:
        fixed[g] = 0.0
    _each_layer_one_option(prob, x, counts, movable)
    _largest_transient(prob, x, any_full, work, gc, counts, fixed, movable)
    _memory_budget(prob, x, work, gc, fixed, budget, movable)
    # Objective: time per micro-batch.
    prob += pulp.lpSum(gc.time_s[g, c] * v for (g, c), v in x.items()) + float((fixed * gc.time_s).sum())
    solver = pulp.HiGHS(msg=False) if pulp.HiGHS().available() else pulp.PULP_CBC_CMD(msg=False)
    prob.solve(solver)
    if prob.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        return None
    choice = fixed.copy()
    for (g, c), v in x.items():
        choice[g, c] = round(v.value() or 0.0)
    time = evaluate(gc, choice, budget)
    return None if time is None else (time, choice)


def _each_layer_one_option(prob, x, counts, movable) -> None:
    """Every layer of a group takes exactly one option."""
    for g in movable:
        prob += x[g, NONE] + x[g, SELECTIVE] + x[g, FULL] == int(counts[g])


def _largest_transient(prob, x, any_full, work, gc, counts, fixed, movable) -> None:
    """The transient term is the largest working set among the layers present."""
    used = fixed > 0
    if used.any():
        prob += work >= float(gc.work_bytes[used].max())
    for g in movable:
        prob += x[g, FULL] <= int(counts[g]) * any_full[g]
        prob += work >= float(gc.work_bytes[g, FULL]) * any_full[g]
        prob += work >= float(max(gc.work_bytes[g, NONE], gc.work_bytes[g, SELECTIVE]))


def _memory_budget(prob, x, work, gc, fixed, budget, movable) -> None:
    """In-flight activations plus the transient fit in what the rank has left."""
    stored = float((fixed * gc.act_bytes).sum())
    import pulp

    activations = pulp.lpSum(float(gc.act_bytes[g, c]) * v for (g, c), v in x.items())
    prob += budget.flight * (activations + stored) + work <= budget.act_budget_bytes
