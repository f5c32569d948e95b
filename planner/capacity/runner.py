"""Run the searches of a sweep: one after another, on a local process pool, or on a Ray cluster.

Searches are grouped into chunks that share a model and cluster; a chunk resolves the model and the
cluster once and hands every search one :class:`~costmodel.table.CostTable`, so layer costs and the
bounds' per-view sums computed for one point are reused by the next (the table's memos hold pure
functions of their keys: each point's plan is the one a single ``meshplan plan`` finds). Chunks keep
a cluster's GPU counts together, neighbours first, so that consecutive searches share the most.

Every search is deterministic, and outcomes are returned in task order whichever way they ran.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from costmodel.headroom import with_headroom
from planner.plans.constraints import PlanConstraints
from planner.errors import InputError

CHUNKS_PER_WORKER = 3
"""Chunks per worker process: more balance the load, fewer share more of the cost table."""


@dataclass(frozen=True)
class Job:
    """What every search of a sweep shares."""

    model: Any
    """The model argument (preset, config.json, factory string or ``ModelSpec``)."""
    target: str = "native"
    top_k: int = 3
    time_limit_s: float | None = None
    memory_headroom_gib: float | None = None
    reports: bool = False
    """Also render each plan's HTML report (in the worker)."""
    constraints: PlanConstraints | None = None
    """Plan constraints of every point (``planner.plans.constraints.read_grid_constraints``)."""
    precision: str = "bf16"
    """GEMM precision of every point's plan (``planner.plan``'s ``precision``)."""
    compile: bool | None = None
    """``planner.plan``'s ``compile`` for every point (None: the target engine's default)."""
    hetero: bool = False
    """Points are mixed or degraded clusters, planned as ``planner.plan`` plans them (``planner.capacity.hetero``)."""
    slow: Any = None
    """``planner.plan``'s ``slow`` for every point."""
    down: Any = None
    """``planner.plan``'s ``down`` for every point."""


@dataclass(frozen=True)
class Task:
    """One search: a cluster, a GPU count, a batch and a sequence length."""

    index: int
    cluster: Any
    gpus: int
    global_batch: int
    seq_len: int


@dataclass(frozen=True)
class Outcome:
    """A search's plan (its JSON text, deterministic) or why there is none."""

    index: int
    global_batch: int
    plan_json: str | None
    report_html: str | None = None
    miss: str | None = None
    shortfall_gib: float | None = None


def run_chunk(job: Job, tasks: Sequence[Task]) -> list[Outcome]:
    """Search every task of one chunk (one model; clusters resolved once, one cost table each)."""
    from costmodel.table import build_cost_table
    from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

    if job.hetero:
        from planner.capacity.hetero import plan_point

        return [Outcome(task.index, task.global_batch, *plan_point(job, task)) for task in tasks]
    model = resolve_model_arg(job.model)
    contexts: dict[str, tuple] = {}
    out = []
    for task in tasks:
        key = repr(task.cluster)
        if key not in contexts:
            cluster = resolve_cluster_arg(task.cluster)
            cluster = with_headroom(cluster, job.memory_headroom_gib)
            contexts[key] = (cluster, build_cost_table(model, cluster))
        out.append(_search(job, task, model, *contexts[key]))
    return out


def _search(job: Job, task: Task, model, cluster, table) -> Outcome:
    """One point, as ``planner.plans.build.plan`` does it, on the shared table."""
    from planner.plans.constraints import PlanConstraints, job_problems
    from planner.plans.build import build_plan, default_time_limit
    from planner.outputs.report import render_report
    from planner.plans.plan_checks import plan_problems
    from search.core import search_plan
    from search.types import Constraints, SearchRequest

    chosen = job.constraints or PlanConstraints()
    problems = job_problems(chosen, task.gpus, task.global_batch)
    if problems:
        return Outcome(task.index, task.global_batch, None, miss="the constraints do not apply: " + "; ".join(problems))
    req = SearchRequest(gpus=task.gpus, global_batch=task.global_batch, seq_len=task.seq_len, target=job.target,  # type: ignore[arg-type]
                        top_k=job.top_k, time_limit_s=default_time_limit(task.gpus, job.time_limit_s),
                        constraints=Constraints(**chosen.model_dump()), precisions=(job.precision,), compile=job.compile)
    result = search_plan(model, cluster, req, table=table)
    if result.best is None:
        return Outcome(task.index, task.global_batch, None, miss=_miss(result), shortfall_gib=result.nearest_miss.estimate.over_by_gib if result.nearest_miss else None)
    plan = build_plan(job.model, model, cluster, req, result, timing=False)
    problems = plan_problems(plan, model)
    if problems:
        raise RuntimeError("the search produced an invalid plan: " + "; ".join(problems))
    html = render_report(plan, "html") if job.reports else None
    return Outcome(task.index, task.global_batch, plan.to_json(), report_html=html)


def _miss(result) -> str:
    """Why a point has no plan, in a few words."""
    miss = result.nearest_miss
    if miss is None:
        return "no configuration applies (" + (result.hints[0] if result.hints else "check the GPU count and batch") + ")"
    return f"no plan fits: nearest short by {miss.estimate.over_by_gib:.1f} GiB per GPU"


def chunks(tasks: Sequence[Task], workers: int) -> list[list[Task]]:
    """Tasks split into runs of the same cluster, in order, about ``CHUNKS_PER_WORKER`` per worker
    (one chunk per cluster when serial)."""
    by_cluster: dict[str, list[Task]] = {}
    for t in tasks:
        by_cluster.setdefault(repr(t.cluster), []).append(t)
    if workers <= 1:
        return list(by_cluster.values())
    size = max(1, -(-len(tasks) // (workers * CHUNKS_PER_WORKER)))
    return [group[i: i + size] for group in by_cluster.values() for i in range(0, len(group), size)]


def run_tasks(job: Job, tasks: Sequence[Task], workers: int = 1, ray_address: str | None = None,
              progress: Callable[[int, int], None] | None = None) -> list[Outcome]:
    """Every task's outcome, in task order: serially, on ``workers`` local processes, or on Ray."""
    parts = chunks(tasks, 1 if ray_address is None and workers <= 1 else max(workers, 2))
    if ray_address is not None:
        from planner.capacity.ray_backend import run_on_ray

        done = run_on_ray(run_chunk, job, parts, ray_address)
    elif workers <= 1 or len(parts) <= 1:
        done = []
        for part in parts:
            done += run_chunk(job, part)
            if progress:
                progress(len(done), len(tasks))
    else:
        done = _run_local(job, parts, workers, len(tasks), progress)
    return sorted(done, key=lambda o: o.index)


def _run_local(job: Job, parts: list[list[Task]], workers: int, total: int, progress) -> list[Outcome]:
    """Chunks on a local process pool, longest first (fork: the workers start with the parent's imports)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    done: list[Outcome] = []
    with ProcessPoolExecutor(max_workers=min(workers, len(parts)), mp_context=context) as pool:
        futures = [pool.submit(run_chunk, job, part) for part in sorted(parts, key=lambda p: (-len(p), p[0].index))]
        for future in as_completed(futures):
            done += future.result()
            if progress:
                progress(len(done), total)
    return done


def check_workers(workers: int) -> None:
    """``--workers`` must be a positive number of processes."""
    if not isinstance(workers, int) or workers < 1:
        raise InputError(f"workers must be a positive number of processes (got {workers!r})")
