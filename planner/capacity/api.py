"""``planner.capacity``: the best plan for every point of a grid (clusters x GPU counts x sequence lengths
x batches), with time, GPU-hours, cost and energy to train on a token budget and the smallest GPU
count per cluster that meets a deadline.

Keyword names match ``meshplan sweep`` flags; grid values may be given as typed on the command line
(``gpus="64..4096"``, ``global_batch="auto"``, ``tokens="2T"``, ``deadline="30d"``) or as Python values.
"""

from __future__ import annotations

from typing import Any

from planner.plans.constraints import PlanConstraints
from planner.errors import InputError, NoFeasiblePlanError
import planner.capacity.grid as grid
from planner.capacity.runs import Grid, PointKey, SweepRun
from planner.capacity.runner import Job, Task, check_workers, run_tasks


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _items(value: Any) -> list[str] | None:
    """``--slow`` / ``--down`` as given (a string or repeated strings) as a list, None when absent."""
    if value is None:
        return None
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _float(value: int | float) -> float:
    """A number as a float; an integer too large for one is infinite (and refused as such)."""
    try:
        return float(value)
    except OverflowError:
        return float("inf")


def parse_grid(*, cluster: Any, gpus: Any, global_batch: Any, seq_len: Any, tokens: Any = None, critical_batch: int | None = None,
               deadline: Any = None, price_per_gpu_hour: Any = None) -> Grid:
    """The grid from flag-like values; an InputError (one line) for the first thing wrong."""
    if critical_batch is not None and (not isinstance(critical_batch, int) or isinstance(critical_batch, bool) or critical_batch <= 0):
        raise InputError(f"--critical-batch must be a positive number of sequences (got {critical_batch!r:.40})")
    from planner.capacity.hetero import is_mixed_arg

    text = _text(cluster)
    clusters = (text.strip(),) if is_mixed_arg(text) else grid.parse_names(text, "--cluster")
    amount = None if tokens is None else grid.check_amount(_float(tokens)) if isinstance(tokens, (int, float)) else grid.parse_amount(tokens, "--tokens")
    seconds = None if deadline is None else grid.check_seconds(_float(deadline)) if isinstance(deadline, (int, float)) else grid.parse_duration(deadline)
    if seconds is not None and amount is None:
        raise InputError("--deadline needs --tokens (the token budget whose training time is compared with the deadline)")
    prices = grid.parse_prices(None if price_per_gpu_hour is None else _text(price_per_gpu_hour), clusters)
    return Grid(clusters, grid.parse_counts(_text(gpus), "--gpus"), grid.parse_batches(_text(global_batch), critical_batch),
                grid.parse_counts(_text(seq_len), "--seq-len"), amount, critical_batch, seconds, prices)


def sweep(*, model: Any, cluster: Any, gpus: Any, global_batch: Any, seq_len: Any, tokens: Any = None,
          critical_batch: int | None = None, deadline: Any = None, price_per_gpu_hour: Any = None, target: str = "native",
          top_k: int = 3, time_limit_s: float | None = None, memory_headroom_gib: float | None = None, precision: str = "bf16",
          compile: bool | None = None, workers: int = 1,
          ray: str | None = None, gpu_tdp_w: float | None = None, node_overhead_w: float | None = None,
          reports: bool = False, progress: Any = None, slow: Any = None, down: Any = None, **constraints: Any) -> SweepRun:
    """Search the best plan for every grid point (see the module docstring).

    ``precision`` and ``compile`` are :func:`planner.plan`'s, for every point (fp8 needs FP8 tensor
    cores on every cluster of the grid).

    ``cluster`` may be one mixed cluster's groups (``"dgx-h100:16,dgx-a100:32"``; ``gpus`` is then its
    total) and ``slow`` / ``down`` degrade every cluster of the grid: each point is then planned as
    :func:`planner.plan` plans it with those arguments (``planner.capacity.hetero``).

    ``constraints``: ``tp``, ``pp``, ``cp``, ``dp``, ``ep``, ``vpp``, ``zero``, ``micro_batch``,
    ``sp``, ``recompute``, ``schedule``, as :func:`planner.plan` takes them, applied to every point.
    Those that contradict the model, each other or the target are an :class:`InputError`; a point
    whose GPU count or batch they cannot tile (``planner.plans.constraints.job_problems``) has no plan,
    and says why.

    Raises :class:`InputError` for a bad grid (empty ranges, GPU counts a cluster cannot hold, ...)
    and :class:`NoFeasiblePlanError` when no point of the grid has a plan. A deadline that no point
    meets is not an error here: ``result.deadline_miss()`` says so (the CLI exits 3).
    """
    from planner.plans.build import engine_option_problems
    from planner.capacity.assemble import assemble

    g = parse_grid(cluster=cluster, gpus=gpus, global_batch=global_batch, seq_len=seq_len, tokens=tokens,
                   critical_batch=critical_batch, deadline=deadline, price_per_gpu_hour=price_per_gpu_hour)
    check_workers(workers)
    if ray is not None:
        from planner.capacity.ray_backend import require_ray

        require_ray()
    from planner.capacity.hetero import fixed_constraints, hetero_specs, is_mixed_arg

    hetero = slow is not None or down is not None or any(is_mixed_arg(c) for c in g.clusters)
    specs = hetero_specs(g.clusters, g.gpus, slow, down) if hetero else _clusters(g)
    problems = engine_option_problems(precision, compile, list(specs.values()))
    if problems:
        raise InputError(*problems)
    chosen = _check_model(model, target, top_k, time_limit_s, memory_headroom_gib, constraints)
    if hetero and target == "native":
        fixed_constraints(chosen)  # refuses what the heterogeneous search cannot take, before any search
    job = Job(model=model, target=target, top_k=top_k, time_limit_s=time_limit_s, memory_headroom_gib=memory_headroom_gib, reports=reports,
              constraints=chosen, precision=precision, compile=compile, hetero=hetero, slow=slow, down=down)
    points, tasks = layout(g)
    outcomes = run_tasks(job, tasks, workers=workers, ray_address=ray, progress=progress)
    run = assemble(model, g, specs, points, outcomes, target, gpu_tdp_w, node_overhead_w, chosen,
                   {"slow": _items(slow), "down": _items(down)})
    if all(p.status != "ok" for p in run.result.points):
        first = run.result.points[0]
        raise NoFeasiblePlanError(f"no point of the grid has a plan; e.g. {first.cluster}, {first.gpus} GPUs: {first.reason}")
    return run


def _clusters(g: Grid) -> dict[str, Any]:
    """Resolve every cluster and check each GPU count fills whole nodes of it (all problems at once)."""
    from planner.intake.arguments import resolve_cluster_arg

    specs = {name: resolve_cluster_arg(name) for name in g.clusters}
    problems = [msg for name, spec in specs.items() for n in g.gpus
                if (msg := grid.holdable_problem(n, spec.gpus_per_node, name)) is not None]
    if problems:
        raise InputError(*problems[:3], *([f"and {len(problems) - 3} more GPU counts"] if len(problems) > 3 else []))
    return specs


CONSTRAINTS = ("tp", "pp", "cp", "dp", "ep", "vpp", "zero", "micro_batch", "sp", "recompute", "schedule")
"""The plan constraints a sweep takes (``planner.plans.constraints``)."""


def _check_model(model: Any, target: str, top_k: int, time_limit_s: float | None, headroom: float,
                 constraints: dict[str, Any]) -> PlanConstraints:
    """The request checks of ``planner.plan`` before any search starts: the search options, the model
    resolves, and the constraints hold for it (all but the per-point checks)."""
    from planner.plans.constraints import read_grid_constraints
    from planner.intake.arguments import resolve_model_arg
    from planner.plans.build import check_target_model, search_option_problems

    unknown = sorted(set(constraints) - set(CONSTRAINTS))
    if unknown:
        raise TypeError(f"sweep() got unexpected keyword arguments: {', '.join(unknown)}")
    problems = search_option_problems(target, top_k, time_limit_s, headroom)
    if problems:
        raise InputError(*problems)
    spec = resolve_model_arg(model)
    check_target_model(target, spec)
    return read_grid_constraints(spec, target, **constraints)


def layout(g: Grid) -> tuple[list[PointKey], list[Task]]:
    """Points in a stable order (cluster, sequence, GPUs, batch) and the searches they need."""
    points, tasks = [], []
    batch_sets = [(b,) for b in g.batches.fixed] or [g.batches.candidates]
    for cluster in g.clusters:
        for seq in g.seq_lens:
            for n in g.gpus:
                for batches in batch_sets:
                    ids = []
                    for b in batches:
                        ids.append(len(tasks))
                        tasks.append(Task(len(tasks), cluster, n, b, seq))
                    points.append(PointKey(len(points), cluster, n, seq, tuple(ids)))
    return points, tasks

