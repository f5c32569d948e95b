"""The estimate of one configuration as data: what ``meshplan estimate --json`` prints and a plan's
``estimate`` holds (DESIGN.md contract), built from the cost model's step estimate.

MFU = model FLOPs / (GPUs x step time x dense BF16 peak), where model FLOPs exclude recomputation and
count causal attention as half of the s x s work (``costmodel.flops``, stated there once).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from costmodel.headroom import headroom_gib
from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig
from costmodel.step import StepEstimate, estimate_step
from costmodel.table import CostTable, build_cost_table

_STRICT = ConfigDict(frozen=True, extra="forbid")


class TimeBreakdown(BaseModel):
    """Where the step time goes, in seconds; the parts add up to ``step_time_s``."""

    model_config = _STRICT
    compute: float
    exposed_comm: float
    pipeline_bubble: float
    recompute: float
    optimizer: float


class LinkTime(BaseModel):
    """Time each dimension's communication occupies its links per step (hidden or not), seconds."""

    model_config = _STRICT
    tp: float
    cp: float
    ep: float
    pp: float
    dp: float


class MemoryBreakdown(BaseModel):
    """Memory of the most loaded GPU, GiB: ``params + grads + optimizer_states + activations_at_peak +
    buffers`` is ``peak_memory_gib``. ``activations`` is the most activation memory the GPU holds at
    any moment of the step (the end of its forwards); ``activations_at_peak`` what it holds at the
    peak, which can be the end of a backward with most activations freed
    (``costmodel.rank_phases.peak_phase``). The first grows with the micro-batch, the second need not."""

    model_config = _STRICT
    params: float
    grads: float
    optimizer_states: float
    activations: float
    activations_at_peak: float
    buffers: float


class RankEstimate(BaseModel):
    """One pipeline rank: its layers (as [start, end) chunks), time per micro-batch, memory."""

    model_config = _STRICT
    rank: int
    chunks: list[list[int]]
    time_per_microbatch_s: float
    memory_gib: float


class EstimateResult(BaseModel):
    """Predicted performance of one configuration (the ``estimate --json`` object)."""

    model_config = _STRICT
    step_time_s: float
    tokens_per_s: float
    mfu: float
    model_tflops_per_gpu: float
    peak_memory_gib: float
    memory_capacity_gib: float
    """What the plan may fill per GPU: the GPU's memory less ``memory_headroom_gib``."""
    memory_headroom_gib: float = 0.0
    """Memory kept free beyond the prediction (``ClusterSpec.memory_headroom_gib``): fits means
    ``peak_memory_gib + memory_headroom_gib`` within the GPU's memory."""
    fits: bool
    over_by_gib: float
    time_breakdown_s: TimeBreakdown
    link_time_s: LinkTime
    memory_breakdown_gib: MemoryBreakdown
    memory_breakdown_rank: int = 0
    """The pipeline rank ``memory_breakdown_gib`` and ``peak_memory_gib`` describe: the most-loaded
    one, which can change between configurations (compare ``pipeline_ranks`` rank by rank)."""
    pipeline_ranks: list[RankEstimate]
    config: dict[str, Any]
    assumptions: list[str]


def result_from_step(table: CostTable, cfg: ParallelConfig, step: StepEstimate, assumptions: list[str]) -> EstimateResult:
    """The contract's result object for a computed step estimate."""
    gpus = cfg.num_gpus
    peak = table.cluster.gpu.peak_bf16_tflops * 1e12
    per_gpu = step.model_flops / (gpus * step.step_time_s)
    r = step.ranks
    times, memories = step.rank_time_s, step.rank_memory_gib
    ranks = [
        RankEstimate(
            rank=i,
            chunks=[list(c) for c in r.chunks(i, cfg.pp)],
            time_per_microbatch_s=float(times[i]),
            memory_gib=float(memories[i]),
        )
        for i in range(cfg.pp)
    ]
    return EstimateResult(
        step_time_s=step.step_time_s,
        tokens_per_s=cfg.global_batch * cfg.seq_len / step.step_time_s,
        mfu=per_gpu / peak,
        model_tflops_per_gpu=per_gpu / 1e12,
        peak_memory_gib=step.peak_memory_gib,
        memory_capacity_gib=step.capacity_gib,
        memory_headroom_gib=headroom_gib(table.cluster),
        fits=step.fits,
        over_by_gib=step.over_by_gib,
        time_breakdown_s=TimeBreakdown(**step.time_breakdown_s),
        link_time_s=LinkTime(**step.link_time_s),
        memory_breakdown_gib=_memory_breakdown(step),
        memory_breakdown_rank=_peak_rank(step),
        pipeline_ranks=ranks,
        config=cfg.model_dump(mode="json"),
        assumptions=_with_mfu_note(assumptions + [n for n in [*table.model.notes, *_phase_note(step)] if n not in assumptions]),
    )


def _memory_breakdown(step: StepEstimate) -> MemoryBreakdown:
    """The peak rank's parts at its peak, with the most activations it holds at any moment."""
    from costmodel.rank_memory import largest_activation_bytes

    rank = _peak_rank(step)
    parts = step.memory_breakdown_gib
    largest = largest_activation_bytes(step.table, step.config, step.ranks.rank(rank), rank) / 2**30
    return MemoryBreakdown(**{**parts, "activations": largest, "activations_at_peak": parts["activations"]})


def memory_part_rows(parts: dict[str, float], labels: tuple[tuple[str, str], ...]) -> list[tuple[str, float, bool]]:
    """(label, GiB, part of the peak) rows of a :class:`MemoryBreakdown` dump, one per ``(key, label)``
    of ``labels``: one activations row where the peak holds the most activations of the step, else
    two, the most held (the end of the forwards, not part of the peak's sum) and what the peak holds."""
    rows = []
    for key, label in labels:
        at_peak = parts.get("activations_at_peak", parts[key]) if key == "activations" else parts[key]
        if parts[key] - at_peak >= 0.005:
            rows.append((f"{label} (most held)", parts[key], False))
            label = f"{label} at the peak"
        rows.append((label, at_peak, True))
    return rows


def _phase_note(step: StepEstimate) -> list[str]:
    """A line when the peak rank peaks at the end of its backward, its activations mostly freed
    (``costmodel.rank_phases.peak_phase``): the activations its forwards hold, for comparison."""
    from costmodel.rank_memory import forward_end_activation_bytes

    rank = _peak_rank(step)
    held = forward_end_activation_bytes(step.config, step.ranks.rank(rank), rank) / 2**30
    shown = step.memory_breakdown_gib["activations"]
    if held - shown < max(0.01, 0.01 * held):  # the two figures as printed, to 0.01 GiB and 1 %
        return []
    return [f"memory peaks at the end of the backward pass (gradients whole, activations freed): {shown:.2f} GiB of "
            f"activations there, {held:.2f} GiB at the end of the forward"]


def _peak_rank(step: StepEstimate) -> int:
    """The first pipeline rank whose memory breakdown is the step's (its largest peak)."""
    memories = step.rank_memory_breakdown_gib
    return next((r for r, parts in enumerate(memories) if parts == step.memory_breakdown_gib), 0)


MFU_NOTE = "MFU counts model FLOPs only: no recompute, causal attention as half the s x s work"


def _with_mfu_note(assumptions: list[str]) -> list[str]:
    return assumptions if MFU_NOTE in assumptions else assumptions + [MFU_NOTE]


def estimate_config(model: ModelSpec, cluster: ClusterSpec, cfg: ParallelConfig, assumptions: list[str] | None = None) -> EstimateResult:
    """Estimate an already validated configuration."""
    table = build_cost_table(model, cluster)
    return result_from_step(table, cfg, estimate_step(table, cfg), list(assumptions or []))
