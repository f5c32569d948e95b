"""``meshplan run``: train a plan for a few steps on synthetic tokens and measure it.

Every rank builds the model on ``meta``, applies the plan (:func:`planner.runtime.apply.apply`),
materialises the unsplit model's seeded weights (:mod:`planner.runtime.init`) and trains ``steps``
steps on seeded token batches of the plan's shape (global batch x (seq + 1)), or, for a model
without a token embedding, seeded features and regression targets (:mod:`planner.runtime.tasks`). Each step is timed
on rank 0 between two barriers (after ``torch.cuda.synchronize`` on CUDA); the record keeps the
median after ``warmup`` steps and the spread. Memory: on CUDA ``max_memory_allocated`` /
``max_memory_reserved``; on CPU torch's ``MemTracker`` (``torch.distributed._tools.mem_tracker``)
over one step, the peak of the tensors it tracks, beside the process's peak RSS (with a pipeline,
whose ``autograd.grad`` calls MemTracker's hooks do not support, the parameter, gradient and
optimizer-state bytes after a step; each rank's record says which). Rank 0 returns the
:class:`~planner.runtime.record.RunRecord`; the other ranks return None.
"""

from __future__ import annotations

import platform
import resource
import socket
import statistics
import time
from typing import Any

import torch
import torch.distributed as dist

from planner.runtime.apply import Runtime, apply
from planner.runtime.init import init_device, materialize
from planner.runtime.models import build_model
from planner.runtime.tasks import Batch, task_for
from planner.runtime.record import (
    Environment,
    ModelRun,
    PlanSummary,
    RankMemory,
    RunRecord,
    StepTimeStats,
    Training,
    compare,
)
from planner.plans.schema import Plan

GIB = 2**30


def run_plan(plan: Plan, model: Any = None, *, steps: int = 10, warmup: int = 2, seed: int = 0,
             device_type: str | None = None, retrace: bool = False) -> RunRecord | None:
    """Train ``plan`` on ``model`` and measure it. ``model`` must be the plan's model; without it
    only a preset plan runs, or, with ``retrace``, the model the plan names (runs its factory: plans
    you trust) (``planner.plans.named_model.runtime_model``)."""
    from planner.plans.named_model import runtime_model

    arg = runtime_model(plan, model, retrace)
    module = build_model(arg, trace=plan.model.trace)
    batch, seq = plan.request.global_batch, plan.request.seq_len
    task = task_for(arg, module, seq)
    runtime = apply(plan, module, device_type=device_type)
    if runtime.compiled and runtime.device.type == "cuda":
        # Inductor warns on stderr unless fp32 matmuls may use TF32; the blocks compute in bf16 anyway
        torch.set_float32_matmul_precision("high")
    torch.manual_seed(seed)
    params = sum(p.numel() for p in module.parameters())
    materialize(runtime, build_model(arg, trace=plan.model.trace, device=init_device(runtime, params)))
    if runtime.device.type == "cuda":
        torch.cuda.empty_cache()  # the unsplit copy's blocks back to the device before the first step
    startup = seconds_since_process_start()
    tracked = _tracked_memory(runtime, task.batch(seed, 0, batch, seq))
    losses, times = [tracked[0]], [tracked[1]]
    for step in range(1, steps):
        loss, seconds = _timed_step(runtime, task.batch(seed, step, batch, seq))
        losses.append(loss)
        times.append(seconds)
    memory = _rank_memory(runtime, tracked[2], tracked[3])
    if dist.get_rank() != 0:
        return None
    record = _record(plan, arg, runtime, params, seed, steps, warmup, losses, times, memory)
    return record.model_copy(update={"training": _training(runtime, module, startup)})


def seconds_since_process_start() -> float | None:
    """Wall seconds since this process started (``psutil.Process().create_time()``); None where unknown."""
    try:
        import psutil

        return time.time() - psutil.Process().create_time()
    except Exception:  # psutil missing or refused: the record leaves the figure out
        return None


def _training(runtime: Runtime, module: Any, startup: float | None) -> Training:
    """The record's dtypes, attention, compile and fp8 facts of ``runtime``."""
    from planner.runtime.attention import attention_backend

    p = runtime.precision
    fused = runtime.device.type == "cuda"
    return Training(compute_dtype=p.name(p.compute), master_dtype=p.name(p.master), reduce_dtype=p.name(p.reduce),
                    precision_reason=p.reason, optimizer=f"AdamW ({'fused' if fused else 'for-each'})",
                    attention=attention_backend(module, runtime.device), compile=runtime.compiled > 0,
                    compiled_blocks=runtime.compiled, fp8=p.fp8, fp8_recipe=p.fp8_recipe if p.fp8 else None,
                    startup_s=startup)


def _sync(runtime: Runtime) -> None:
    if runtime.device.type == "cuda":
        torch.cuda.synchronize(runtime.device)
    dist.barrier()


def _timed_step(runtime: Runtime, tokens: Batch) -> tuple[float, float]:
    _sync(runtime)
    start = time.perf_counter()
    loss = runtime.step(tokens)
    _sync(runtime)
    return loss, time.perf_counter() - start


def _tracked_memory(runtime: Runtime, tokens: Batch) -> tuple[float, float, float, str]:
    """The first step (a warm-up step) under the memory tool: (loss, seconds, peak bytes, source)."""
    if runtime.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(runtime.device)
        loss, seconds = _timed_step(runtime, tokens)
        return loss, seconds, float(torch.cuda.max_memory_allocated(runtime.device)), CUDA_SOURCE
    if runtime.schedule is not None:
        loss, seconds = _timed_step(runtime, tokens)
        return loss, seconds, _state_bytes(runtime), STATES_SOURCE
    if runtime.plan.schedule.num_microbatches > 1:  # MemTracker refuses a module run twice in one session
        loss, seconds = _timed_step(runtime, tokens)
        return loss, seconds, _state_bytes(runtime), ACCUMULATION_SOURCE
    if runtime.compiled:  # under MemTracker's dispatch mode dynamo would give up on the blocks for good
        loss, seconds = _timed_step(runtime, tokens)
        return loss, seconds, _state_bytes(runtime), COMPILED_SOURCE
    from torch.distributed._tools.mem_tracker import MemTracker

    tracker = MemTracker()
    tracker.track_external(*runtime.stages, runtime.optimizer)
    with tracker:
        loss, seconds = _timed_step(runtime, tokens)
    peak = tracker.get_tracker_snapshot("peak")
    total = sum(float(per_device.get("Total", 0)) for per_device in peak.values()) if peak else 0.0
    return loss, seconds, total, TRACKER_SOURCE


CUDA_SOURCE = "torch.cuda.max_memory_allocated / max_memory_reserved"
TRACKER_SOURCE = "torch.distributed._tools.mem_tracker.MemTracker peak over one step; reserved = process peak RSS"
STATES_SOURCE = ("parameters, gradients and optimizer states alive after one step (MemTracker's hooks do not support "
                 "the autograd.grad calls of torch.distributed.pipelining); reserved = process peak RSS")
COMPILED_SOURCE = ("parameters, gradients and optimizer states alive after one step (torch.compile does not trace "
                   "under MemTracker's dispatch mode); reserved = process peak RSS")
ACCUMULATION_SOURCE = ("parameters, gradients and optimizer states alive after one step (MemTracker refuses a module "
                       "called once per micro-batch within one step); reserved = process peak RSS")


def _state_bytes(runtime: Runtime) -> float:
    """Bytes of this rank's parameter, gradient and optimizer-state shards."""
    from torch.distributed.tensor import DTensor

    def local(t: torch.Tensor) -> torch.Tensor:
        return t.to_local() if isinstance(t, DTensor) else t

    tensors = [p for _, p in runtime.named_parameters()]
    tensors += [p.grad for p in tensors if p.grad is not None]
    tensors += [v for state in runtime.optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]
    return float(sum(local(t).numel() * local(t).element_size() for t in tensors))


def _rank_memory(runtime: Runtime, tracked_bytes: float, source: str) -> list[dict[str, Any]]:
    """Every rank's memory facts, gathered to all ranks."""
    if runtime.device.type == "cuda":
        reserved: float | None = torch.cuda.max_memory_reserved(runtime.device) / GIB
        name = torch.cuda.get_device_name(runtime.device)
    else:
        reserved = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB
        name = _cpu_name()
    mine = dict(rank=dist.get_rank(), pp_rank=runtime.mesh.coordinate("pp"), allocated=tracked_bytes / GIB,
                reserved=reserved, source=source, device=name, host=socket.gethostname())
    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    return everyone


def _cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def _record(plan: Plan, arg: Any, runtime: Runtime, params: int, seed: int, steps: int, warmup: int,
            losses: list[float], times: list[float], memory: list[dict[str, Any]]) -> RunRecord:
    from costmodel.flops import model_flops_per_step
    from planner.plans.named_model import plan_model
    from planner.plans.build import summary

    timed = times[warmup:] or times
    median = statistics.median(timed)
    world = dist.get_world_size()
    tokens = plan.request.global_batch * plan.request.seq_len
    spec = plan_model(plan)
    flops = model_flops_per_step(spec.layers, plan.request.global_batch, plan.request.seq_len)
    mfu = flops / (world * median * plan.cluster.gpu.peak_bf16_tflops * 1e12)
    est = plan.estimate
    ranks = [RankMemory(rank=m["rank"], pp_rank=m["pp_rank"], source=m["source"], peak_allocated_gib=m["allocated"],
                        peak_reserved_gib=m["reserved"], predicted_gib=est.pipeline_ranks[m["pp_rank"]].memory_gib,
                        error=compare(m["allocated"], est.pipeline_ranks[m["pp_rank"]].memory_gib).error) for m in memory]
    return RunRecord(
        plan=_plan_summary(plan, summary(plan.config)),
        model=ModelRun(arg=str(arg), name=plan.model.name, num_layers=plan.model.num_layers, params=params,
                       dtype=str(next(runtime.stages[0].parameters()).dtype).removeprefix("torch.")),
        world_size=world,
        env=Environment(torch_version=torch.__version__, python_version=platform.python_version(), platform=platform.platform(),
                        backend=str(dist.get_backend()), device_type=runtime.device.type,  # type: ignore[arg-type]
                        device_names=[m["device"] for m in memory], cuda_version=torch.version.cuda,
                        hostnames=sorted({m["host"] for m in memory})),
        seed=seed, steps=steps, warmup=warmup, losses=losses,
        step_time=StepTimeStats(median_s=median, min_s=min(timed), max_s=max(timed), spread=(max(timed) - min(timed)) / median,
                                timed_steps=len(timed), warmup_steps=len(times) - len(timed), all_steps_s=times),
        step_time_s=compare(median, est.step_time_s),
        tokens_per_s=compare(tokens / median, est.tokens_per_s),
        mfu=compare(mfu, est.mfu),
        peak_memory_gib=compare(max(m["allocated"] for m in memory), est.peak_memory_gib),
        memory=ranks,
        notes=_notes(runtime),
    )


def _plan_summary(plan: Plan, line: str) -> PlanSummary:
    mesh = plan.mesh.model_dump(mode="json")
    return PlanSummary(summary=line, model_arg=plan.model.arg, cluster_name=plan.cluster.name,
                       cluster=plan.cluster.model_dump(mode="json"), gpus=plan.request.gpus,
                       global_batch=plan.request.global_batch, seq_len=plan.request.seq_len,
                       micro_batch=plan.schedule.micro_batch, num_microbatches=plan.schedule.num_microbatches,
                       schedule=plan.schedule.name, virtual_stages=plan.schedule.virtual_stages, mesh=mesh,
                       stage_layers=[list(s.layers) for s in plan.stages], config=plan.config.model_dump(mode="json"),
                       estimate=plan.estimate.model_dump(mode="json"))


def _notes(runtime: Runtime) -> list[str]:
    notes = ["weights: the unsplit model's own initialisation under --seed, then sharded; batches: seeded tokens "
             "(a model without a token embedding: seeded normal features and targets, mean squared error)",
             f"training: {runtime.precision.reason}; AdamW states in {runtime.precision.name(runtime.precision.master)}"]
    if runtime.device.type != "cuda":
        notes.append(f"MFU divides by the plan cluster's GPU peak ({runtime.plan.cluster.gpu.name}), not this CPU's: "
                     "compare it between runs only")
    if runtime.plan.mesh.zero in (1, 2) and runtime.mesh.dp > 1:
        notes.append("ZeRO 1/2 ran as FSDP2 without resharding after forward (ZeRO-2 semantics)")
    if runtime.mesh.cp > 1:
        from planner.runtime.context_parallel import describe

        notes.append(describe(runtime.mesh.cp, runtime.device.type))
    return notes
