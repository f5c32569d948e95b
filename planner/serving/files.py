"""Read, check and write serving plan files.

The validator is written apart from the search: it re-prices the plan's deployment with
``serve_estimate`` and refuses a plan whose recorded estimate, GPU count or layout disagrees.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from planner.errors import InputError
from planner.atomic import write_atomic
from planner.intake.jsonio import dumps, read_json
from planner.serving.schema import SERVING_SCHEMA_VERSION, ServingPlan, WorkerGroup

RELATIVE_TOLERANCE = 1e-6
"""How far a recorded figure may sit from the re-priced one (rounding of the JSON numbers)."""


def plan_json(plan: ServingPlan) -> str:
    """The plan file's text: sorted keys, two-space indent, a final newline (byte-identical for the
    same plan)."""
    return dumps(plan.model_dump(), indent=2, sort_keys=True) + "\n"


def save_serving_plan(plan: ServingPlan, path: str) -> None:
    """Write ``plan`` atomically."""
    write_atomic(path, plan_json(plan))


def parse_serving_plan(data: Any, where: str = "serving plan") -> ServingPlan:
    """The plan in ``data`` (a parsed JSON object), schema-checked; InputError names the first problem."""
    if not isinstance(data, dict):
        raise InputError(f"{where} must hold a JSON object")
    if data.get("kind") != "serving":
        raise InputError(f"{where} has kind {data.get('kind')!r}, not 'serving'")
    if data.get("schema_version") != SERVING_SCHEMA_VERSION:
        raise InputError(f"{where} has schema_version {data.get('schema_version')!r}; this meshplan reads {SERVING_SCHEMA_VERSION}")
    try:
        return ServingPlan.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{where}: {loc}: {first['msg']}") from None


def _group_kwargs(group: WorkerGroup, prefix: str) -> dict[str, Any]:
    return {f"{prefix}workers": group.workers, f"{prefix}tp": group.tp, f"{prefix}pp": group.pp,
            f"{prefix}ep": group.ep, f"{prefix}attention_dp": group.attention_dp}


def estimate_kwargs(plan: ServingPlan) -> dict[str, Any]:
    """The ``serve_estimate`` keywords that re-price the plan's deployment."""
    est, req = plan.estimate, plan.request
    base: dict[str, Any] = dict(model=plan.model, cluster=plan.cluster, gpus=req.gpus, isl=req.isl, osl=req.osl,
                                precision=req.precision, kv_dtype=req.kv_dtype, engine=req.engine,
                                concurrency=est.concurrency)
    groups = {g.role: g for g in est.deployment.groups}
    if est.deployment.mode == "aggregated":
        g = groups["aggregated"]
        return {**base, "gpus": g.workers * g.gpus_per_worker, "tp": g.tp, "pp": g.pp, "ep": g.ep,
                "attention_dp": g.attention_dp}
    kw = {**base, **_group_kwargs(groups["prefill"], "prefill_"), **_group_kwargs(groups["decode"], "decode_")}
    return kw


def check_serving_plan(plan: ServingPlan) -> list[str]:
    """Every disagreement between the plan and a fresh estimate of its deployment (empty: valid).
    Plan files are data: a model given as ``file.py:factory`` is refused, never imported."""
    from planner.serving.estimate import serve_estimate

    if ":" in plan.model and not plan.model.endswith(".json"):
        return [f"model {plan.model!r:.80} names code to run; a serving plan is re-priced from a preset or a config.json only"]
    problems: list[str] = []
    dep = plan.estimate.deployment
    used = sum(g.workers * g.gpus_per_worker for g in dep.groups)
    if used != dep.gpus or used > plan.request.gpus:
        problems.append(f"deployment uses {used} GPUs, records {dep.gpus}, request allows {plan.request.gpus}")
    roles = sorted(g.role for g in dep.groups)
    if roles not in (["aggregated"], ["decode", "prefill"]) or (dep.mode == "aggregated") != (roles == ["aggregated"]):
        problems.append(f"a {dep.mode} deployment cannot have worker roles {roles}")
    over = [g for g in dep.groups if g.role != "prefill" and plan.request.max_batch is not None
            and g.concurrency_per_worker > plan.request.max_batch]
    if over:
        problems.append(f"{over[0].role} workers run {over[0].concurrency_per_worker} sequences each, over the request's "
                        f"max_batch {plan.request.max_batch}")
    if problems:
        return problems
    fresh = serve_estimate(**estimate_kwargs(plan))
    for key in ("output_tokens_per_s_per_gpu", "ttft_ms", "tpot_ms"):
        recorded, now = getattr(plan.estimate, key), getattr(fresh, key)
        if not math.isclose(recorded, now, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-3):
            problems.append(f"estimate.{key} is {recorded} but the deployment prices at {now}")
    if not fresh.fits:
        problems.append("the deployment does not fit in memory")
    req = plan.request
    if req.ttft_ms is not None and fresh.ttft_ms > req.ttft_ms * (1 + RELATIVE_TOLERANCE):
        problems.append(f"TTFT {fresh.ttft_ms} ms misses the target {req.ttft_ms} ms")
    if req.tpot_ms is not None and fresh.tpot_ms > req.tpot_ms * (1 + RELATIVE_TOLERANCE):
        problems.append(f"TPOT {fresh.tpot_ms} ms misses the target {req.tpot_ms} ms")
    return problems


def load_serving_plan(path: str) -> ServingPlan:
    """Read and validate a serving plan file; InputError (one line) when it is not a valid plan."""
    data = read_json(path, f"serving plan {path}", "pass a file written by meshplan serve-plan -o")
    plan = parse_serving_plan(data, f"serving plan {path}")
    problems = check_serving_plan(plan)
    if problems:
        raise InputError(f"serving plan {path} is invalid: {problems[0]}", *problems[1:])
    return plan
