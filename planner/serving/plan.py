"""``planner.serve_plan``: search the deployments and write the best that meets the latency targets
as a serving plan (``kind: "serving"``) with its runners-up and the Pareto frontier."""

from __future__ import annotations

from typing import Any

from costmodel.serving.deployment import aggregated, disaggregated
from costmodel.serving.memory import GIB
from planner.errors import InputError, NoFeasiblePlanError
from planner.serving.estimate import to_result, workload
from planner.serving.request import Context, context, latency_problems
from planner.serving.schema import (
    Alternative,
    FrontierPoint,
    SearchInfo,
    ServeEstimate,
    ServingPlan,
    ServingRequest,
)
from search.serving import (
    Candidate,
    ServingSearchResult,
    ServingTargets,
    search_serving,
)

TOP_K = 5
"""Runners-up kept in the plan (distinct layouts: the best batch of each)."""


def estimate_candidate(ctx: Context, c: Candidate) -> ServeEstimate:
    """The full estimate of a searched deployment (the same cost functions, all fields filled)."""
    work = workload(ctx)
    if c.prefill is None:
        est = aggregated(ctx.hardware, ctx.shape, c.decode, c.decode_workers, work, ctx.engine, c.batch * c.decode_workers)
    else:
        est = disaggregated(ctx.hardware, ctx.shape, c.prefill, c.prefill_workers, c.decode, c.decode_workers, work,
                            ctx.engine, c.batch * c.decode_workers)
    return to_result(ctx, est)


def _layout(c: Candidate) -> str:
    """What makes a runner-up different: the mode and the (decode) instance, not the batch or the
    prefill worker when decode sets the pace."""
    return f"{c.mode} {c.decode.model_dump_json()}"


def _alternatives(best: Candidate, ranked: list[Candidate]) -> list[Alternative]:
    seen, out = {_layout(best)}, []
    for c in ranked:
        if _layout(c) in seen:
            continue
        seen.add(_layout(c))
        loss = 1.0 - c.per_gpu / best.per_gpu if best.per_gpu else 0.0
        out.append(Alternative(label=c.label, output_tokens_per_s_per_gpu=round(c.per_gpu, 3),
                               ttft_ms=round(c.ttft_s * 1e3, 3), tpot_ms=round(c.tpot_s * 1e3, 3),
                               why=f"{loss:.1%} fewer output tokens/s per GPU than {best.label}"))
        if len(out) == TOP_K:
            break
    return out


def _frontier(result: ServingSearchResult) -> list[FrontierPoint]:
    return [FrontierPoint(output_tokens_per_s_per_gpu=round(c.per_gpu, 3), tokens_per_s_per_user=round(c.tokens_per_user, 3),
                          ttft_ms=round(c.ttft_s * 1e3, 3), tpot_ms=round(c.tpot_s * 1e3, 3), meets_targets=c.meets,
                          label=c.label) for c in result.frontier]


def _no_plan(ctx: Context, result: ServingSearchResult, targets: ServingTargets) -> NoFeasiblePlanError:
    """Exit 3: the nearest miss and what would make it fit."""
    if result.nearest_miss is None:
        short = result.smallest_shortfall_bytes / GIB
        return NoFeasiblePlanError(
            f"no deployment of {ctx.spec.name} fits on {ctx.cluster.gpu.name}: the closest needs {short:.2f} GiB more per "
            f"GPU for weights, workspace and runtime; add GPUs, or lower --precision", shortfall_gib=short)
    c = result.nearest_miss
    wants = []
    if targets.ttft_s is not None and c.ttft_s > targets.ttft_s:
        wants.append(f"--ttft-ms {c.ttft_s * 1e3:.0f} (target {targets.ttft_s * 1e3:g})")
    if targets.tpot_s is not None and c.tpot_s > targets.tpot_s:
        wants.append(f"--tpot-ms {c.tpot_s * 1e3:.1f} (target {targets.tpot_s * 1e3:g})")
    return NoFeasiblePlanError(
        f"no deployment meets the latency targets; nearest miss: {c.label} with TTFT {c.ttft_s * 1e3:.1f} ms and "
        f"TPOT {c.tpot_s * 1e3:.1f} ms; it would need {' and '.join(wants)}, or faster GPUs or lower precision")


def serve_plan(*, model: Any, cluster: Any, gpus: int, isl: int, osl: int, ttft_ms: float | None = None,
               tpot_ms: float | None = None, precision: str = "bf16", kv_dtype: str | None = None,
               engine: str = "vllm", disaggregation: str = "auto", max_batch: int | None = None,
               timing: bool = False) -> ServingPlan:
    """Search every deployment of ``model`` on at most ``gpus`` GPUs of ``cluster`` and return the plan
    of the highest output tokens/s per GPU meeting ``ttft_ms`` and ``tpot_ms``. Raises InputError for
    bad input and NoFeasiblePlanError (with the nearest miss) when nothing meets the targets.
    ``max_batch`` caps the sequences one worker runs at once (the engine's ``--max-num-seqs`` /
    ``--max-running-requests`` / ``--max_batch_size``; a load test's concurrency per instance), below
    the engine's own cap. ``timing`` records the search's wall time (otherwise the same inputs give
    byte-identical plans)."""
    problems = latency_problems(ttft_ms, tpot_ms)
    if disaggregation not in ("auto", "on", "off"):
        problems.append(f"unknown disaggregation {disaggregation!r}; choose auto, on, off")
    if max_batch is not None and (isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1):
        problems.append(f"max-batch must be a whole number of sequences >= 1, got {max_batch!r}")
    if problems:
        raise InputError(*problems)
    ctx = context(model=model, cluster=cluster, gpus=gpus, isl=isl, osl=osl, precision=precision,
                  kv_dtype=kv_dtype, engine=engine)
    if disaggregation == "on" and gpus < 2:
        raise InputError("disaggregation needs at least 2 GPUs (one prefill and one decode worker)")
    targets = ServingTargets(ttft_s=ttft_ms / 1e3 if ttft_ms else None, tpot_s=tpot_ms / 1e3 if tpot_ms else None,
                             disaggregation=disaggregation, max_batch=max_batch)
    result = search_serving(ctx.hardware, ctx.shape, workload(ctx), ctx.engine, gpus, targets)
    if not result.ranked:
        raise _no_plan(ctx, result, targets)
    best = result.ranked[0]
    request = ServingRequest(gpus=gpus, isl=isl, osl=osl, ttft_ms=ttft_ms, tpot_ms=tpot_ms, precision=precision,
                             kv_dtype=ctx.kv_dtype, engine=engine, disaggregation=disaggregation,
                             max_batch=max_batch)  # type: ignore[arg-type]
    return ServingPlan(model=model if isinstance(model, str) else ctx.spec.name,
                       cluster=cluster if isinstance(cluster, str) else ctx.cluster.name, request=request,
                       estimate=estimate_candidate(ctx, best), alternatives=_alternatives(best, result.ranked),
                       frontier=_frontier(result),
                       search=SearchInfo(wall_time_s=round(result.wall_time_s, 3) if timing else None, candidates=result.candidates,
                                         feasible=len(result.ranked)))
