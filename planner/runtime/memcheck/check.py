"""``meshplan check-memory``: a plan's per-GPU memory measured by PyTorch itself, beside the prediction.

For each kind of pipeline rank the cost model distinguishes (``costmodel.ranks``: ranks holding the
same layers; the first of each kind, which holds the most micro-batches), the check starts torch's
fake process group of the plan's full world size as that rank, builds the real module on ``meta``,
applies the plan (:mod:`planner.runtime.memcheck.build`), materialises it as fake tensors and runs
one training step under ``FSDPMemTracker`` (:mod:`planner.runtime.memcheck.step`). No GPU and no
memory are needed: a 70B model on 64 ranks checks on a laptop.

What torch's tracker cannot see is kept apart, explicitly (``costmodel.step.rank_gpu_only_bytes``):
the cluster's ``runtime_overhead_gib`` (CUDA context, NCCL communicators and their buffers, the
framework's workspaces), the caching allocator's slack (``costmodel.step.FRAGMENTATION`` of the
activations: rounding and fragmentation) and its cache (gradients freed by ``zero_grad`` before the
peak stay reserved; the freed bf16 logits' block an eager loss's fp32 backward buffers cannot
reuse). The tracker counts tensor storages exactly, so ``predicted_peak_gib`` is the cost model's
allocated-memory prediction (``costmodel.step.rank_allocated_bytes``), and
``predicted_gpu_peak_gib`` the plan's full per-GPU figure.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict

from planner.plans.schema import Plan

GIB = float(1 << 30)
_STRICT = ConfigDict(frozen=True, extra="forbid")


class RankMemory(BaseModel):
    """One kind of pipeline rank: measured and predicted peak, GiB, by category."""

    model_config = _STRICT
    pp_rank: int
    """The pipeline rank measured (the first of its kind)."""
    ranks_of_kind: int
    """Pipeline ranks of this kind (each holds ``tp x cp x dp`` GPUs)."""
    layers: list[list[int]]
    """[start, end) layer ranges of the rank's chunks."""
    measured_peak_gib: float
    predicted_peak_gib: float
    """The cost model's prediction of what the tracker counts (GPU-only terms removed)."""
    predicted_gpu_peak_gib: float
    """The cost model's full per-GPU prediction (the plan's figure)."""
    error: float
    """predicted_peak_gib / measured_peak_gib - 1 (negative: under-predicted)."""
    measured_gib: dict[str, float]
    predicted_gib: dict[str, float]
    gpu_only_gib: dict[str, float]
    """Terms a GPU run has and the tracker cannot see: runtime overhead, allocator slack, cache and loss block."""
    seconds: float
    extrapolated: bool
    """Measured at shallow depths and extrapolated (``planner.runtime.memcheck.depth``), not at full depth."""


class MemoryCheck(BaseModel):
    """The ``check-memory --json`` object."""

    model_config = _STRICT
    model: str
    world_size: int
    mesh: dict[str, Any]
    schedule: str
    micro_batch: int
    num_microbatches: int
    mixed_precision: bool
    ranks: list[RankMemory]
    max_error: float
    """Largest |error| over the rank kinds."""
    notes: list[str]


PREDICT_ENGINE = "native"
"""The cost model's engine for the stack the check runs: ``native``, whose memory terms are the
native runtime's (eager PyTorch, FSDP2 mixed precision for every ZeRO level, ``F.cross_entropy`` on
fp32 logits, torch pipelining: ``costmodel.engines``), so that a native plan's per-GPU figure is the
check's ``predicted_gpu_peak_gib`` of its largest rank."""


def _predicted(plan: Plan, spec: Any) -> Any:
    """The cost model's step estimate of the plan's exact configuration under :data:`PREDICT_ENGINE`."""
    from costmodel.step import estimate_step
    from costmodel.table import build_cost_table

    table = build_cost_table(spec, plan.cluster)
    return estimate_step(table, plan.config.model_copy(update={"engine": PREDICT_ENGINE}))


def _as_built(spec: Any, arg: Any, trace: bool) -> tuple[Any, list[str]]:
    """``spec`` as the module torch runs: blocks flagged with dropout are predicted without dropout
    masks when the built module has no dropout (``planner.runtime.models.DecoderLM`` has none); the
    note says so."""
    from torch import nn

    from costmodel.specs import TransformerLayer
    from planner.runtime.models import build_model

    if not any(isinstance(x, TransformerLayer) and x.dropout for x in spec.layers):
        return spec, []
    if any(isinstance(m, nn.Dropout) and m.p > 0 for m in build_model(arg, trace).modules()):
        return spec, []
    layers = tuple(x.model_copy(update={"dropout": False}) if isinstance(x, TransformerLayer) else x for x in spec.layers)
    return spec.model_copy(update={"layers": layers}), [
        "the model's blocks are specified with dropout but the module torch runs has none: predicted without dropout masks"]


def check_memory(plan: Plan, model: Any = None, pp_ranks: list[int] | None = None,
                 full_depth: bool = False, retrace: bool = False) -> MemoryCheck:
    """Measure ``plan``'s per-rank peak memory with torch's tracker (see the module docstring).

    ``model`` is the plan's model (a preset, config.json, ``file.py:factory`` or ModelSpec; its layer
    list must hash to the plan's ``spec_sha256``); without it only a preset plan is built, or, with
    ``retrace``, the model the plan names (runs its factory: plans you trust) (``planner.plans.named_model.runtime_model``);
    ``pp_ranks`` picks the pipeline ranks to measure (default: the first of each kind);
    ``full_depth`` measures every block instead of extrapolating from shallow copies
    (:mod:`planner.runtime.memcheck.depth`).
    Raises InputError when the plan does not match the model.
    """
    from planner.intake.arguments import resolve_model_arg
    from planner.plans.named_model import runtime_model
    from planner.runtime.memcheck.build import stop_fake_world, uses_mixed_precision
    from planner.runtime.memcheck.depth import can_extrapolate, describe

    from planner.runtime.models import build_model
    from planner.runtime.oom import oom_answered
    from planner.runtime.tasks import task_for

    arg = runtime_model(plan, model, retrace)
    spec = resolve_model_arg(arg, plan.model.trace)
    task = task_for(arg, build_model(arg, plan.model.trace), plan.request.seq_len)
    built, dropout_note = _as_built(spec, arg, plan.model.trace)
    step = _predicted(plan, built)
    kinds = step.ranks
    chosen = pp_ranks if pp_ranks is not None else list(kinds.first_rank)
    shallow = not full_depth and can_extrapolate(plan, spec)
    rows = []
    try:
        for r in chosen:
            start = time.perf_counter()
            tracked, gpu_only = step.rank_memory_parts_gib(r)
            with oom_answered("check-memory", r, plan, sum(tracked.values())):
                measured, extrapolated = _measure_rank(plan, arg, spec, r, shallow, task)
            peak = measured.pop("total") / GIB
            predicted = sum(tracked.values())
            rows.append(RankMemory(
                pp_rank=r, ranks_of_kind=kinds.count[kinds.rank_type[r]],
                layers=[list(c) for c in kinds.chunks(r, plan.mesh.pp)],
                measured_peak_gib=peak, predicted_peak_gib=predicted,
                predicted_gpu_peak_gib=sum(step.rank_memory_breakdown_gib[r].values()),
                error=predicted / peak - 1 if peak else 0.0,
                measured_gib={k: v / GIB for k, v in measured.items()}, predicted_gib=tracked, gpu_only_gib=gpu_only,
                seconds=time.perf_counter() - start, extrapolated=extrapolated,
            ))
    finally:
        stop_fake_world()
    m = plan.mesh
    return MemoryCheck(
        model=arg if isinstance(arg, str) else spec.name, world_size=m.dp * m.tp * m.pp * m.cp,
        mesh=dict(dp=m.dp, tp=m.tp, pp=m.pp, cp=m.cp, ep=m.ep, sp=m.sp, zero=m.zero),
        schedule=plan.schedule.name, micro_batch=plan.schedule.micro_batch,
        num_microbatches=plan.schedule.num_microbatches, mixed_precision=uses_mixed_precision(plan),
        ranks=rows, max_error=max((abs(r.error) for r in rows), default=0.0),
        notes=_notes(plan) + dropout_note + [f"rank {x.pp_rank}: {describe(x.extrapolated)}" for x in rows],
    )


def _measure_rank(plan: Plan, arg: Any, spec: Any, pp_rank: int, shallow: bool, task: Any) -> tuple[dict[str, float], bool]:
    """Tracker bytes by category at ``pp_rank``'s peak, and whether they were extrapolated (from
    shallow copies that proved affine) rather than measured at full depth."""
    from planner.runtime.memcheck.depth import DEPTHS, extrapolate, is_affine, rank_blocks, shallow_module, shallow_plan
    from planner.runtime.models import build_model

    if shallow:
        runs = []
        for depth in DEPTHS:
            small_plan, small = shallow_plan(plan, spec, depth)  # type: ignore[misc]
            runs.append(_measure(small_plan, lambda: shallow_module(arg, small, depth), pp_rank, task))
        if is_affine(runs):
            return extrapolate(runs, rank_blocks(plan, spec, pp_rank)), True
    return _measure(plan, lambda: _full_module(arg, plan.model.trace), pp_rank, task), False


def _in_compute_dtype(module: Any, plan: Plan) -> Any:
    """``module`` (on meta) in bf16 when the plan computes in bf16, as FSDP2's mixed precision runs it
    (transformers' ``grouped_mm`` experts take bf16 only)."""
    from planner.runtime.memcheck.build import uses_mixed_precision

    return module.to(torch.bfloat16) if uses_mixed_precision(plan) else module


def _full_module(arg: Any, trace: bool) -> Any:
    """The plan's module at full depth. A transformers mixture-of-experts model runs its experts
    with transformers' default ``grouped_mm`` implementation, as the shallow copies do
    (:func:`planner.runtime.memcheck.depth.shallow_module`): the ``eager`` loop the runtime builds
    picks each expert's tokens with ``nonzero``, whose output shape fake tensors cannot know."""
    from planner.runtime.models import build_model

    module = build_model(arg, trace)
    experts = any(p.ndim == 3 for p in module.parameters())
    if experts and getattr(getattr(module, "config", None), "_experts_implementation", None) == "eager":
        module.set_experts_implementation("grouped_mm")
    return module


def _measure(plan: Plan, make_module: Any, pp_rank: int, task: Any) -> dict[str, float]:
    """One tracked step of ``pp_rank`` on a fresh fake world and a fresh module, on ``task``'s data
    (:class:`planner.runtime.tasks.Task`: token ids, or a model's features and regression targets)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from planner.runtime.memcheck.build import build_rank, start_fake_world
    from planner.runtime.memcheck.step import boundary_shapes, measure_step

    boundaries = boundary_shapes(_in_compute_dtype(make_module(), plan), plan, task) if plan.mesh.pp > 1 else {}
    start_fake_world(plan)
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    build = build_rank(plan, make_module(), pp_rank, fake_mode, tokens=task.vocab is not None)
    return measure_step(plan, build, fake_mode, boundaries, task)


def _notes(plan: Plan) -> list[str]:
    """What the reader must know to compare the numbers with a GPU run."""
    notes = [
        "measured: torch FSDPMemTracker on fake tensors (tensor storages only, exact bytes)",
        f"GPU-only terms kept apart: runtime overhead {plan.cluster.runtime_overhead_gib:g} GiB "
        "(CUDA context, NCCL, workspaces), allocator slack on activations, allocator cache of freed gradients and of the loss's bf16 logits",
        f"predicted with the cost model's {PREDICT_ENGINE} engine terms (eager PyTorch and FSDP2, as planner.apply runs)",
    ]
    if plan.mesh.zero == 1:
        notes.append("zero 1 runs as FSDP2 zero 2 (gradients sharded): torch has no optimizer-only sharding")
    return notes
