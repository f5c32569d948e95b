"""``planner.plan``: search a plan and build the plan JSON from the search result (:func:`build_plan`)."""

from __future__ import annotations

from typing import Any

from costmodel.headroom import with_headroom
from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig
from costmodel.table import build_cost_table
from planner.plans.constraints import PlanConstraints, read_constraints
from planner.errors import InputError, NoFeasiblePlanError
from planner.estimation.result import EstimateResult, result_from_step
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
from planner.plans.named_model import spec_digest
from planner.plans.schema import SCHEMA_VERSION, Alternative, Mesh, ModelInfo, Plan, RequestInfo, ScheduleInfo, SearchInfo, Stage
from search.types import Candidate, Constraints, SearchRequest, SearchResult

PLANNER_VERSION = "0.1.0"


def plan(
    *,
    model: Any,
    cluster: Any,
    gpus: int,
    global_batch: int,
    seq_len: int,
    target: str = "native",
    precision: str = "bf16",
    compile: bool | None = None,
    top_k: int = 3,
    time_limit_s: float | None = None,
    memory_headroom_gib: float | None = None,
    timing: bool = False,
    trace: bool = False,
    progress: Any = None,
    tp: Any = None,
    pp: Any = None,
    cp: Any = None,
    dp: Any = None,
    ep: Any = None,
    vpp: Any = None,
    zero: Any = None,
    micro_batch: Any = None,
    sp: bool | None = None,
    recompute: str | None = None,
    schedule: str | None = None,
) -> Plan:
    """Search the fastest plan that fits (keyword names match ``meshplan plan`` flags).

    ``tp`` ... ``micro_batch`` fix a dimension (an int) or bound it (a ``(lo, hi)`` tuple, ``hi``
    None for no upper bound, or a string ``"1..4"``); ``sp``, ``recompute`` and ``schedule`` fix
    theirs; the search explores the rest (``planner.plans.constraints``), and the plan echoes the
    constraints in ``request.constraints``. Constraints that no configuration satisfies raise
    :class:`NoFeasiblePlanError` naming the nearest configuration and what it breaks.

    ``memory_headroom_gib`` keeps that much of every GPU free beyond the estimate, in place of the
    cluster's own ``memory_headroom_gib`` (None keeps the cluster's: its file's figure, or the measured
    default ``costmodel.headroom.DEFAULT_HEADROOM_FRACTION``), so the plan's echoed cluster, its capacity
    and the validator all see it.

    ``precision`` ``fp8`` searches plans whose blocks' projections run as FP8 GEMMs (Transformer
    Engine / torchao / MXFP8 on Blackwell, ``costmodel.precision``); a GPU without FP8 tensor cores
    is bad input.

    ``compile`` True plans for fused elementwise kernels (torch.compile on torchtitan, which also
    lets its plans overlap TP communication as async TP; the export turns both on), False for
    kernels run op by op; None keeps the target engine's default (``costmodel.engines``: torchtitan
    eager, the others fused).

    Raises :class:`InputError` for bad input and :class:`NoFeasiblePlanError` (with the nearest miss
    and what would make it fit) when nothing fits.
    """
    from search.core import search_plan

    _check_request(gpus, global_batch, seq_len, target, top_k, time_limit_s, memory_headroom_gib)
    problems = engine_option_problems(precision, compile)
    if problems:
        raise InputError(*problems)
    model_spec, cluster_spec = resolve_model_arg(model, trace), resolve_cluster_arg(cluster)
    problems = engine_option_problems(precision, compile, [cluster_spec])
    if problems:
        raise InputError(*problems)
    check_target_model(target, model_spec)
    cluster_spec = with_headroom(cluster_spec, memory_headroom_gib)
    chosen = read_constraints(model_spec, gpus, global_batch, target, tp=tp, pp=pp, cp=cp, dp=dp, ep=ep, vpp=vpp, zero=zero,
                              micro_batch=micro_batch, sp=sp, recompute=recompute, schedule=schedule)
    req = SearchRequest(gpus=gpus, global_batch=global_batch, seq_len=seq_len, target=target, top_k=top_k,  # type: ignore[arg-type]
                        time_limit_s=default_time_limit(gpus, time_limit_s), constraints=Constraints(**chosen.model_dump()),
                        precisions=(precision,), compile=compile)
    result = search_plan(model_spec, cluster_spec, req, progress)
    if result.best is None:
        raise NoFeasiblePlanError(_miss_message(result, gpus), _shortfall(result))
    built = build_plan(model, model_spec, cluster_spec, req, result, timing, trace)
    from planner.plans.plan_checks import plan_problems

    problems = plan_problems(built, model_spec)
    if problems:
        raise RuntimeError("the search produced an invalid plan: " + "; ".join(problems))
    return built


def _check_request(gpus: int, global_batch: int, seq_len: int, target: str, top_k: int, time_limit_s: float | None,
                   memory_headroom_gib: float | None) -> None:
    """Every argument of the wrong type or out of range, in one :class:`InputError`."""
    from planner.intake.arguments import count_problems

    problems = count_problems(gpus=gpus, global_batch=global_batch, seq_len=seq_len)
    problems += search_option_problems(target, top_k, time_limit_s, memory_headroom_gib)
    if problems:
        raise InputError(*problems)


def engine_option_problems(precision: Any, compile: Any, clusters: list[ClusterSpec] | None = None) -> list[str]:
    """What is wrong with the engine options ``planner.plan`` and ``planner.capacity`` share, one line
    each: the GEMM precision (bf16 or fp8, and fp8 only on ``clusters`` whose GPU has FP8 tensor
    cores) and ``compile`` (True, False or None)."""
    problems = []
    if precision not in ("bf16", "fp8"):
        problems.append(f"precision must be bf16 or fp8 (got {precision!r:.40})")
    elif precision == "fp8":
        problems += [f"precision fp8: GPU {c.gpu.name} has no FP8 tensor cores (use --precision bf16)"
                     for c in clusters or [] if c.gpu.peak_fp8_tflops is None]
    if compile is not None and not isinstance(compile, bool):
        problems.append(f"compile must be True, False or None (got {compile!r:.40})")
    return problems


def search_option_problems(target: str, top_k: int, time_limit_s: float | None, memory_headroom_gib: float | None) -> list[str]:
    """What is wrong with the search options ``planner.plan`` and ``planner.capacity`` share (target,
    top-k, time limit, memory headroom), one line each; empty when nothing is."""
    from planner.intake.arguments import number_problem

    problems = []
    if not isinstance(target, str) or target not in ("native", "megatron", "torchtitan", "deepspeed"):
        problems.append(f"unknown target {target!r:.40}; use native, megatron, torchtitan or deepspeed")
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 0 <= top_k <= MAX_TOP_K:
        problems.append(f"top-k must be an integer from 0 to {MAX_TOP_K} (got {top_k!r:.40})")
    if time_limit_s is not None:
        problems += number_problem("time-limit", time_limit_s, zero_ok=False, unit="seconds", most=MAX_TIME_LIMIT_S)
    if memory_headroom_gib is not None:
        problems += number_problem("memory-headroom", memory_headroom_gib, zero_ok=True, unit="GiB", most=1e6)
    return problems


def check_target_model(target: str, model: ModelSpec) -> None:
    """A model the target's launcher cannot build is bad input for ``--target`` (exit 2), not a search."""
    from planner.plans.engines.common import UnsupportedPlanError
    from planner.plans.engines.engines import check_model_for

    try:
        check_model_for(target, model)
    except UnsupportedPlanError as err:
        raise InputError(f"--target {target}: {err.field}: {str(err).split(': ', 2)[-1]}; plan it with --target native") from None


LARGE_SEARCH_GPUS = 65_536
"""Searches over more GPUs than this get :data:`LARGE_SEARCH_TIME_LIMIT_S` unless given a limit."""
LARGE_SEARCH_TIME_LIMIT_S = 300.0
"""Default time limit of a large search (the plan records it in ``request.time_limit_s``)."""


def default_time_limit(gpus: int, time_limit_s: float | None) -> float | None:
    """The search's time limit: the one given, else :data:`LARGE_SEARCH_TIME_LIMIT_S` for searches
    over more than :data:`LARGE_SEARCH_GPUS` GPUs (they have the most meshes), else none."""
    if time_limit_s is None and gpus > LARGE_SEARCH_GPUS:
        return LARGE_SEARCH_TIME_LIMIT_S
    return time_limit_s


MAX_TOP_K = 1000
"""Most runners-up a plan records."""
MAX_TIME_LIMIT_S = 7 * 24 * 3600.0
"""Longest search time limit accepted (a week)."""


def _shortfall(result: SearchResult) -> float | None:
    return result.nearest_miss.estimate.over_by_gib if result.nearest_miss else None


def _miss_message(result: SearchResult, gpus: int) -> str:
    miss = result.nearest_miss
    if miss is None:
        if result.hints and result.hints[0].startswith("no configuration satisfies"):
            return result.hints[0]
        return f"no configuration of the search space applies to {gpus} GPUs; " + result.hints[0]
    x, est = miss.config, miss.estimate
    return (
        f"no plan fits in memory; nearest miss: tp {x.tp} x pp {x.pp} x cp {x.cp} x dp {x.dp}, zero {x.zero}, "
        f"recompute {x.recompute}, micro-batch {x.micro_batch} needs {est.peak_memory_gib:.1f} GiB of "
        f"{est.capacity_gib:.1f} GiB (short by {est.over_by_gib:.1f} GiB); would fit with: " + ", or ".join(result.hints)
    )


def build_plan(model_arg: Any, model: ModelSpec, cluster: ClusterSpec, req: SearchRequest, result: SearchResult, timing: bool,
               trace: bool = False, assumptions: list[str] | None = None) -> Plan:
    """Turn a search result into the plan JSON model."""
    best = result.best
    assert best is not None
    table = build_cost_table(model, cluster)
    cfg = best.config
    estimate = result_from_step(table, cfg, best.estimate, list(assumptions or []))
    constraints = PlanConstraints(**vars(req.constraints)) if req.constraints else None
    return Plan(
        schema_version=SCHEMA_VERSION,
        planner_version=PLANNER_VERSION,
        model=_model_info(model_arg, model, trace),
        cluster=cluster,
        request=RequestInfo(gpus=req.gpus, global_batch=req.global_batch, seq_len=req.seq_len, target=req.target,
                            precision=req.precisions[-1], top_k=req.top_k,  # type: ignore[arg-type]
                            time_limit_s=req.time_limit_s, constraints=constraints),
        mesh=Mesh(dp=cfg.dp, tp=cfg.tp, pp=cfg.pp, cp=cfg.cp, ep=cfg.ep, sp=cfg.sp, zero=cfg.zero, gpus_per_node=cluster.gpus_per_node, nodes=-(-req.gpus // cluster.gpus_per_node)),
        schedule=ScheduleInfo(name=cfg.schedule, virtual_stages=cfg.vpp, micro_batch=cfg.micro_batch, num_microbatches=cfg.num_microbatches, global_batch=cfg.global_batch),
        stages=_stages(table, cfg, estimate, cluster),
        config=cfg,
        estimate=estimate,
        alternatives=[_alternative(i + 1, c, best) for i, c in enumerate(result.alternatives)],
        search=SearchInfo(
            wall_time_s=round(result.stats.wall_time_s, 3) if timing else None,
            candidates_evaluated=result.stats.evaluated,
            candidates_pruned=result.stats.pruned,
            solver=result.stats.solver,
            status=result.stats.status,
            optimality_gap=round(result.stats.gap, 6),
            time_limit_s=req.time_limit_s,
        ),
    )


def _model_info(arg: Any, model: ModelSpec, trace: bool) -> ModelInfo:
    """The plan's model facts; every model but a preset carries its layer list (``spec``), and every
    model its digest, so that reading the plan never needs the model's source again."""
    from costmodel.params import layer_params
    from planner.intake.models import PRESETS

    name = arg if isinstance(arg, str) else model.source or model.name
    preset = isinstance(arg, str) and not trace and arg.strip().lower() in PRESETS
    return ModelInfo(arg=name, trace=trace, name=model.name, num_layers=len(model.layers), layer_names=[x.name for x in model.layers],
                     params=sum(layer_params(x) for x in model.layers), source=model.source,
                     spec=None if preset else model, spec_sha256=spec_digest(model))


def _stages(table, cfg: ParallelConfig, est: EstimateResult, cluster: ClusterSpec) -> list[Stage]:
    sizes = cfg.stage_layers or table.default_split(cfg.pp * cfg.vpp)
    recompute = cfg.layer_recompute or tuple(cfg.recompute if table.recomputable[i] else "none" for i in range(len(table.layer_group)))
    per_rank = cfg.tp * cfg.cp * cfg.dp
    stages, start = [], 0
    for k, size in enumerate(sizes):
        rank = k % cfg.pp
        first, last = rank * per_rank, (rank + 1) * per_rank - 1
        layers = list(range(start, start + size))
        stages.append(Stage(
            index=k, pp_rank=rank, virtual_chunk=k // cfg.pp, layers=layers,
            layer_recompute=[recompute[i] for i in layers],
            ranks=[first, last], nodes=[first // cluster.gpus_per_node, last // cluster.gpus_per_node],
            time_per_microbatch_s=est.pipeline_ranks[rank].time_per_microbatch_s,
            memory_gib=est.pipeline_ranks[rank].memory_gib,
        ))
        start += size
    return stages


def summary(cfg: ParallelConfig) -> str:
    """One line naming a configuration's shape."""
    sched = cfg.schedule + (f" v{cfg.vpp}" if cfg.vpp > 1 else "")
    rc = "per-layer" if cfg.layer_recompute else cfg.recompute
    return (f"tp {cfg.tp} x pp {cfg.pp} x cp {cfg.cp} x dp {cfg.dp} (ep {cfg.ep}), {'sp, ' if cfg.sp else ''}zero {cfg.zero}, "
            f"{sched}, micro-batch {cfg.micro_batch}, recompute {rc}")


def _alternative(rank: int, c: Candidate, best: Candidate) -> Alternative:
    slower = c.step_time_s / best.step_time_s - 1
    why = f"{slower:.1%} slower ({c.step_time_s:.3f} s vs {best.step_time_s:.3f} s per step)"
    return Alternative(rank=rank, summary=summary(c.config), config=c.config.model_dump(mode="json"), step_time_s=c.step_time_s, peak_memory_gib=c.estimate.peak_memory_gib, fits=c.fits, why_lost=why)


