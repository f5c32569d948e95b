"""Sweeps over mixed or degraded clusters (issue 22): every point planned by the heterogeneous search.

``--cluster dgx-h100:16,dgx-a100:32`` (or a groups JSON file) is one mixed cluster: its GPU count
is its groups' total, so ``--gpus`` must be that total, and the sweep runs over batches and
sequence lengths (and prices, tokens, deadline). With ``--slow`` / ``--down``, every cluster of the
grid is degraded the same way at every GPU count (GPUs and nodes numbered as in ``meshplan plan``;
a GPU or node past a point's cluster is bad input). Each point is what ``meshplan plan`` with the
same flags gives (``planner.plans.route.plan``: the heterogeneous search for the native target,
the uniform plan on healthy nodes for the others).

A mixed cluster's point counts nodes, GPU type and power from its first group (the sweep's point
has one GPU type); the plan and its step are the whole cluster's.
"""

from __future__ import annotations

import os
from typing import Any

from planner.errors import InputError
from planner.plans.constraints import PlanConstraints

FIXED_ONLY = ("tp", "pp", "micro_batch", "zero")
"""Constraints the heterogeneous search takes, as fixed values only (``planner.plans.hetero.plan.hetero_request``)."""


def is_mixed_arg(text: str) -> bool:
    """Whether a sweep's ``--cluster`` names GPU groups: every comma part ``C:N``, or a groups JSON file."""
    from planner.intake.groups import names_groups

    parts = [p.strip() for p in text.split(",")]
    counted = [p.rpartition(":")[2].isdigit() and bool(p.rpartition(":")[0]) for p in parts]
    if any(counted) and not all(counted):
        raise InputError(f"--cluster {text!r:.80}: give cluster presets (dgx-a100,dgx-h100) or one mixed cluster's groups "
                         "(dgx-h100:16,dgx-a100:32), not both")
    return all(counted) or (len(parts) == 1 and not os.path.isdir(text) and names_groups(text))


def hetero_specs(clusters: tuple[str, ...], gpus: tuple[int, ...], slow: Any, down: Any) -> dict[str, Any]:
    """Each cluster's point spec (its first group's ``ClusterSpec``), after checking that every
    (cluster, GPU count) resolves with ``slow`` / ``down`` applied; an InputError (one line) otherwise."""
    from planner.intake.groups import resolve_hetero

    specs = {}
    for name in clusters:
        for n in gpus:
            cluster = resolve_hetero(name, n, slow, down)
        specs[name] = cluster.groups[0].cluster
    return specs


def fixed_constraints(chosen: PlanConstraints | None) -> dict[str, int]:
    """The constraints as ``planner.plan`` keywords for a heterogeneous point: fixed tp, pp,
    micro-batch or ZeRO only."""
    if chosen is None:
        return {}
    out: dict[str, int] = {}
    for name, value in chosen.model_dump().items():
        if value is None:
            continue
        if name not in FIXED_ONLY or chosen.fixed(name) is None:
            shown = value if not isinstance(value, (tuple, list)) else value[0] if value[0] == value[1] else f"{value[0]}..{value[1] or ''}"
            raise InputError(f"--{name.replace('_', '-')} {shown} is not searched on a heterogeneous cluster "
                             "(fix only --tp, --pp, --micro-batch or --zero there, each to one value)")
        out[name] = chosen.fixed(name)  # type: ignore[assignment]
    return out


def plan_point(job: Any, task: Any) -> tuple[str | None, str | None, str | None]:
    """(plan JSON, HTML report, why there is no plan) of one point as ``meshplan plan`` with the
    sweep's flags plans it (``job`` and ``task`` are ``planner.capacity.runner``'s): the native
    target takes fixed tp, pp, micro-batch and ZeRO only; the others every constraint (they plan
    uniformly on healthy nodes, ``planner.plans.hetero.uniform``)."""
    from planner.errors import NoFeasiblePlanError
    from planner.outputs.report import render_report
    from planner.plans.route import plan as make_plan

    chosen = job.constraints.model_dump() if job.constraints is not None else {}
    constraints = fixed_constraints(job.constraints) if job.target == "native" else {k: v for k, v in chosen.items() if v is not None}
    try:
        plan = make_plan(model=job.model, cluster=task.cluster, gpus=task.gpus, global_batch=task.global_batch, seq_len=task.seq_len,
                         target=job.target, top_k=job.top_k, time_limit_s=job.time_limit_s, memory_headroom_gib=job.memory_headroom_gib,
                         precision=job.precision, compile=job.compile, slow=job.slow, down=job.down, **constraints)
    except NoFeasiblePlanError as err:
        return None, None, str(err).splitlines()[0][:200]
    html = render_report(plan, "html") if job.reports else None
    return plan.to_json(), html, None
