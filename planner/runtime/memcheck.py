"""``meshplan check-memory``: a plan's per-GPU memory measured by PyTorch itself, beside the prediction.

For each kind of pipeline rank the cost model distinguishes (``costmodel.ranks``: ranks holding the
same layers; the first of each kind, which holds the most micro-batches), the check starts torch's
fake process group of the plan's full world size as that rank, builds the real module on ``meta``,
applies the plan (:mod:`planner.runtime.memcheck_apply`), materialises it as fake tensors and runs
one training step under ``FSDPMemTracker`` (:mod:`planner.runtime.memcheck_step`). No GPU and no
memory are needed: a 70B model on 64 ranks checks on a laptop.

What torch's tracker cannot see is kept apart, explicitly: the cost model's ``runtime_overhead_gib``
(CUDA context, NCCL communicators and their buffers, the framework's workspaces) and its allocator
slack (``costmodel.step.FRAGMENTATION`` of the activations: the caching allocator's rounding and
fragmentation). The tracker counts tensor storages exactly, so ``predicted_peak_gib`` is the
prediction without those terms, and ``predicted_gpu_peak_gib`` the plan's full per-GPU figure.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from planner.schema import Plan

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
    """Terms a GPU run has and the tracker cannot see: runtime overhead, allocator slack."""
    seconds: float


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


def _predicted(plan: Plan, model_arg: str) -> tuple[Any, Any]:
    """The cost model's step estimate of the plan's exact configuration, and its table."""
    from costmodel.step import estimate_step
    from costmodel.table import build_cost_table
    from planner.inputs import resolve_model_arg

    spec = resolve_model_arg(model_arg, plan.model.trace)
    table = build_cost_table(spec, plan.cluster)
    return estimate_step(table, plan.config), table


def _split_prediction(parts: dict[str, float], runtime_gib: float) -> tuple[dict[str, float], dict[str, float]]:
    """(tracked categories, GPU-only terms) of one rank's predicted breakdown, GiB."""
    from costmodel.step import FRAGMENTATION

    slack = FRAGMENTATION * parts["activations"]
    tracked = {k: parts[k] for k in ("params", "grads", "optimizer_states", "activations")}
    tracked["buffers"] = max(0.0, parts["buffers"] - runtime_gib - slack)
    return tracked, {"runtime_overhead": runtime_gib, "allocator_slack": slack}


def check_memory(plan: Plan, model: str | None = None, pp_ranks: list[int] | None = None) -> MemoryCheck:
    """Measure ``plan``'s per-rank peak memory with torch's tracker (see the module docstring).

    ``model`` overrides the plan's model argument (a moved config.json); ``pp_ranks`` picks the
    pipeline ranks to measure (default: the first of each kind). Raises InputError when the plan
    does not match the model.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    from planner.runtime.memcheck_apply import build_rank, start_fake_world, stop_fake_world, uses_mixed_precision
    from planner.runtime.memcheck_step import boundary_shapes, measure_step
    from planner.runtime.models import build_model

    arg = model or plan.model.arg
    step, _ = _predicted(plan, arg)
    kinds = step.ranks
    chosen = pp_ranks if pp_ranks is not None else list(kinds.first_rank)
    boundaries = boundary_shapes(build_model(arg, plan.model.trace), plan) if plan.mesh.pp > 1 else {}
    runtime_gib = plan.cluster.runtime_overhead_gib
    rows = []
    try:
        for r in chosen:
            start = time.perf_counter()
            start_fake_world(plan, r)
            fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
            build = build_rank(plan, build_model(arg, plan.model.trace), r, fake_mode)
            measured = measure_step(plan, build, fake_mode, boundaries)
            parts = step.rank_memory_breakdown_gib[r]
            tracked, gpu_only = _split_prediction(parts, runtime_gib)
            peak = measured.pop("total") / GIB
            predicted = sum(tracked.values())
            rows.append(RankMemory(
                pp_rank=r, ranks_of_kind=kinds.count[kinds.rank_type[r]],
                layers=[list(c) for c in kinds.chunks(r, plan.mesh.pp)],
                measured_peak_gib=peak, predicted_peak_gib=predicted, predicted_gpu_peak_gib=sum(parts.values()),
                error=predicted / peak - 1 if peak else 0.0,
                measured_gib={k: v / GIB for k, v in measured.items()}, predicted_gib=tracked, gpu_only_gib=gpu_only,
                seconds=time.perf_counter() - start,
            ))
    finally:
        stop_fake_world()
    m = plan.mesh
    return MemoryCheck(
        model=arg, world_size=m.dp * m.tp * m.pp * m.cp,
        mesh=dict(dp=m.dp, tp=m.tp, pp=m.pp, cp=m.cp, ep=m.ep, sp=m.sp, zero=m.zero),
        schedule=plan.schedule.name, micro_batch=plan.schedule.micro_batch,
        num_microbatches=plan.schedule.num_microbatches, mixed_precision=uses_mixed_precision(plan),
        ranks=rows, max_error=max((abs(r.error) for r in rows), default=0.0), notes=_notes(plan),
    )


def _notes(plan: Plan) -> list[str]:
    """What the reader must know to compare the numbers with a GPU run."""
    notes = [
        "measured: torch FSDPMemTracker on fake tensors (tensor storages only, exact bytes)",
        f"GPU-only terms kept apart: runtime overhead {plan.cluster.runtime_overhead_gib:g} GiB "
        "(CUDA context, NCCL, workspaces) and allocator slack on activations",
    ]
    if plan.mesh.zero == 1:
        notes.append("zero 1 runs as FSDP2 zero 2 (gradients sharded): torch has no optimizer-only sharding")
    return notes
