"""``meshplan run`` of a plan with uneven data-parallel shares or an injected slowdown (issue 22).

Every rank builds the whole model from the seed (the same weights as the one-process run), trains
its share of each seeded batch with :class:`planner.runtime.shares.ShareRuntime` (whole-model
replicas) or its stage of its replica's pipeline (:mod:`planner.runtime.hetero_pipeline`), and the
step is timed on rank 0 between two barriers, as ``planner.runtime.run`` times it. A uniform plan
run with ``--inject-slowdown`` takes this path too (equal shares; a uniform pipeline runs as
pipelined replicas), so that a uniform and a straggler-aware plan are measured by the same code. Rank 0 returns the run record with every
rank's compute, injected wait and sync times (``RunRecord.rank_times``).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch
import torch.distributed as dist

from planner.plans.schema import Plan
from planner.runtime.rank_times import RankTime
from planner.runtime.record import (
    Environment,
    ModelRun,
    RunRecord,
    StepTimeStats,
    compare,
)
from planner.runtime.shares import ShareRuntime, check_share_plan, plan_counts, replica_of


def parse_injection(text: str | None) -> dict[int, float]:
    """``"3=0.5,1=0.8"`` as {rank: speed}; speeds in (0, 1]. Raises ``InputError`` with one line."""
    from planner.errors import InputError

    out: dict[int, float] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        rank, sep, value = item.partition("=")
        try:
            speed = float(value)
            index = int(rank)
        except ValueError:
            raise InputError(f"--inject-slowdown '{item}': write RANK=SPEED, e.g. 3=0.5") from None
        if not sep or index < 0 or not 0 < speed <= 1:
            raise InputError(f"--inject-slowdown '{item}': a rank >= 0 and a speed in (0, 1], e.g. 3=0.5")
        out[index] = speed
    return out


def rank_gpu(plan: Plan, rank: int) -> tuple[int, int]:
    """(cluster-wide GPU, group) of ``rank``'s replica: its first device, or GPU ``rank`` of a uniform plan."""
    if plan.hetero is None:
        return rank, 0
    stage = plan.hetero.replicas[replica_of(plan, rank)].stages[0]
    return stage.devices[0], stage.group


def run_shares(plan: Plan, arg: Any, *, steps: int, warmup: int, seed: int, inject: dict[int, float]) -> RunRecord | None:
    """Train ``plan`` (whole-model or pipelined replicas, uneven shares allowed) for ``steps`` steps; rank 0's record."""
    from planner.runtime.models import build_model
    from planner.runtime.tasks import task_for

    world, rank = dist.get_world_size(), dist.get_rank()
    check_share_plan(plan, world)
    if any(r >= world for r in inject):
        from planner.errors import InputError

        raise InputError(f"--inject-slowdown names rank {max(inject)}, the world has ranks 0..{world - 1}")
    torch.manual_seed(seed)
    module = build_model(arg, trace=plan.model.trace, device="cpu")
    params = sum(p.numel() for p in module.parameters())
    batch, seq = plan.request.global_batch, plan.request.seq_len
    task = task_for(arg, module, seq)
    runtime = _runtime(plan, module, rank, inject.get(rank, 1.0), task)
    losses, times = [], []
    for step in range(steps):
        tokens = task.batch(seed, step, batch, seq)
        dist.barrier()
        start = time.perf_counter()
        losses.append(runtime.step(tokens))
        dist.barrier()
        times.append(time.perf_counter() - start)
    everyone: list[Any] = [None] * world
    dist.all_gather_object(everyone, _rank_time(plan, runtime, rank).model_dump())
    if rank != 0:
        return None
    return _record(plan, arg, params, seed, steps, warmup, losses, times, [RankTime(**r) for r in everyone], inject)


def _runtime(plan: Plan, module: Any, rank: int, speed: float, task: Any) -> Any:
    """This rank's :class:`ShareRuntime`, or its stage of a pipelined replica (:mod:`planner.runtime.hetero_pipeline`,
    token models only); ``task`` (:class:`~planner.runtime.tasks.Task`) gives the loss."""
    from planner.runtime.apply import default_optimizer
    from planner.runtime.hetero_layout import is_pipelined

    if is_pipelined(plan):
        from planner.runtime.hetero_pipeline import build_pipe_runtime

        if task.vocab is None:
            from planner.errors import InputError

            raise InputError("pipelined replicas with uneven shares or injected slowdowns run token models only; "
                             "plan a model without tokens with pp 1, or run it without --inject-slowdown")
        return build_pipe_runtime(plan, module, speed=speed, make_optimizer=default_optimizer, loss_fn=task.loss)
    return ShareRuntime(module=module, optimizer=default_optimizer(list(module.parameters())), counts=plan_counts(plan),
                        micro_batch=plan.schedule.micro_batch, rank=replica_of(plan, rank), loss_fn=task.loss, speed=speed)


def _rank_time(plan: Plan, runtime: Any, rank: int) -> RankTime:
    """This rank's seconds per step, with its GPU, group and share (and its layers and sends when it pipelines)."""
    timings = runtime.timings
    common = dict(rank=rank, injected_speed=runtime.speed, compute_s=[t.compute_s for t in timings],
                  wait_s=[t.wait_s for t in timings], sync_s=[t.sync_s for t in timings])
    if isinstance(runtime, ShareRuntime):
        gpu, group = rank_gpu(plan, rank)
        return RankTime(gpu=gpu, group=group, micro_batches=runtime.counts[runtime.rank], **common)
    role = runtime.role
    return RankTime(gpu=role.gpu, group=role.group, micro_batches=role.micro_batches, layers=list(role.layers),
                    p2p_s=list(runtime.p2p), **common)


def _record(plan: Plan, arg: Any, params: int, seed: int, steps: int, warmup: int, losses: list[float], times: list[float],
            ranks: list[RankTime], inject: dict[int, float]) -> RunRecord:
    import platform

    from planner.plans.build import summary
    from planner.runtime.run import _cpu_name, _plan_summary

    timed = times[warmup:] or times
    median = statistics.median(timed)
    est = plan.estimate
    notes = [("uneven data-parallel shares: each rank runs its replica's micro-batches; gradients weighted by D m_r / M "
              "(costmodel.hetero.gradient_weights) before one mean all-reduce per step"),
             "weights: the unsplit model's own initialisation under --seed on every rank; batches: seeded tokens"]
    if any(r.layers is not None for r in ranks):
        notes.append("replicas pipeline: each rank runs its stage's layers in GPipe order (every forward, then every backward) "
                     "with blocking sends and receives between the replica's stages (p2p_s, bubbles included); each layer's "
                     "gradient is averaged over the ranks that hold it (planner.runtime.hetero_pipeline)")
    if inject:
        notes.append(f"injected slowdown {inject}: after each micro-batch's forward and backward a rank at speed s sleeps "
                     "(1/s - 1) x that compute")
    return RunRecord(
        plan=_plan_summary(plan, summary(plan.config)),
        model=ModelRun(arg=str(arg), name=plan.model.name, num_layers=plan.model.num_layers, params=params, dtype="float32"),
        world_size=len(ranks),
        env=Environment(torch_version=torch.__version__, python_version=platform.python_version(), platform=platform.platform(),
                        backend=str(dist.get_backend()), device_type="cpu", device_names=[_cpu_name()] * len(ranks),
                        hostnames=[platform.node()]),
        seed=seed, steps=steps, warmup=warmup, losses=losses,
        step_time=StepTimeStats(median_s=median, min_s=min(timed), max_s=max(timed), spread=(max(timed) - min(timed)) / median,
                                timed_steps=len(timed), warmup_steps=len(times) - len(timed), all_steps_s=times),
        step_time_s=compare(median, est.step_time_s),
        tokens_per_s=compare(plan.request.global_batch * plan.request.seq_len / median, est.tokens_per_s),
        mfu=compare(None, est.mfu), peak_memory_gib=compare(None, est.peak_memory_gib),
        notes=notes, rank_times=ranks,
    )
