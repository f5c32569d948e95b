"""``planner.plan``: the homogeneous search, or the heterogeneous one for a cluster of groups.

A cluster argument that names GPU groups (``dgx-h100:16,dgx-a100:32`` or a groups JSON file), or
comes with ``slow`` / ``down`` (``"5=0.5,node:2=0.7"``, ``"node:3"``), is planned by
``planner.plans.hetero.plan.plan_on_groups``; every other call is exactly ``planner.plans.build.plan``.
"""

from __future__ import annotations

import inspect
from typing import Any

from planner.plans.schema import Plan


def plan(*, slow: Any = None, down: Any = None, **kwargs: Any) -> Plan:
    """Search the fastest plan that fits; the keywords of ``planner.plans.build.plan``, plus ``slow``
    (slow GPUs or nodes) and ``down`` (lost nodes). Raises ``InputError`` for bad input and
    ``NoFeasiblePlanError`` when nothing fits."""
    from planner.plans.build import _check_request, engine_option_problems
    from planner.plans.build import plan as homogeneous
    from planner.intake.groups import names_groups
    from planner.plans.hetero.plan import plan_on_groups

    if slow is None and down is None and not names_groups(kwargs.get("cluster")):
        return homogeneous(**kwargs)
    try:
        bound = inspect.signature(homogeneous).bind(**kwargs)
    except TypeError as err:
        from planner.errors import InputError

        raise InputError(f"planner.plan: {err}") from None
    bound.apply_defaults()
    args = dict(bound.arguments)
    _check_request(args["gpus"], args["global_batch"], args["seq_len"], args["target"], args["top_k"], args["time_limit_s"],
                   args["memory_headroom_gib"])
    problems = engine_option_problems(args["precision"], args["compile"])
    if problems:
        from planner.errors import InputError

        raise InputError(*problems)
    return plan_on_groups(homogeneous, args, slow, down)
