"""``planner.estimate``: predict one parallel configuration's step time and memory.

The result's ``model_dump()`` is what ``meshplan estimate --json`` prints (DESIGN.md contract).
MFU = model FLOPs / (GPUs x step time x dense BF16 peak), where model FLOPs exclude recomputation and
count causal attention as half of the s x s work (``costmodel.flops``, stated there once).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig
from costmodel.step import StepEstimate, estimate_step
from costmodel.table import CostTable, build_cost_table
from planner.errors import InputError
from planner.inputs import resolve_cluster_arg, resolve_model_arg
from planner.knobs import knob_settings
from planner.validation import parallel_problems

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
    """Memory of the most loaded GPU, GiB; the parts add up to ``peak_memory_gib``."""

    model_config = _STRICT
    params: float
    grads: float
    optimizer_states: float
    activations: float
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


def build_config(model: ModelSpec, cluster: ClusterSpec, gpus: int, **settings: Any) -> tuple[ParallelConfig, list[str]]:
    """A validated ParallelConfig from user settings (DP derived), and the defaults it assumed.

    Raises InputError naming every problem at once.
    """
    assumptions: list[str] = []
    knobs = settings.pop("knobs", None) or {}
    engine_fields, engine_assumptions, knob_problems = knob_settings(cluster, settings, knobs)
    settings.update(engine_fields)
    tp, pp, cp = settings.get("tp", 1), settings.get("pp", 1), settings.get("cp", 1)
    if settings.get("sp") is None:
        settings["sp"] = tp > 1 and model.has_sequence
        why = "default: on when tp > 1" if model.has_sequence else "no sequence to split: one token per sample"
        assumptions.append(f"sequence parallelism {'on' if settings['sp'] else 'off'} ({why})")
    if settings.get("zero") is None:
        settings["zero"] = 1
        assumptions.append("zero 1: distributed optimizer (default)")
    if settings.get("schedule") is None:
        settings["schedule"] = "interleaved-1f1b" if settings.get("vpp", 1) > 1 else "1f1b"
    if settings.get("attention") is None:
        flash = "v100" not in cluster.gpu.name
        settings["attention"] = "flash" if flash else "eager"
        assumptions.append("FlashAttention" if flash else "eager attention (no FlashAttention on this GPU)")
    product = tp * pp * cp
    settings["dp"] = max(1, gpus // product) if isinstance(gpus, int) and gpus > 0 and product > 0 else 1
    try:
        cfg = ParallelConfig(**{k: v for k, v in settings.items() if v is not None})
    except ValidationError as err:
        raise InputError(*_pydantic_problems(err)) from None
    problems = knob_problems + parallel_problems(model, cfg, gpus)
    if problems:
        raise InputError(*problems)
    assumptions.extend(engine_assumptions)
    assumptions.append(f"dp = {gpus} GPUs / (tp {tp} x pp {pp} x cp {cp}) = {cfg.dp}")
    return cfg, assumptions


def _pydantic_problems(err: ValidationError) -> list[str]:
    out = []
    for e in err.errors():
        field = ".".join(str(x) for x in e["loc"]) or "value"
        out.append(f"{field.replace('_', '-')}: {e['msg'].lower()} (got {e.get('input')!r})")
    return out


def result_from_step(table: CostTable, cfg: ParallelConfig, step: StepEstimate, assumptions: list[str]) -> EstimateResult:
    """The contract's result object for a computed step estimate."""
    gpus = cfg.num_gpus
    peak = table.cluster.gpu.peak_bf16_tflops * 1e12
    per_gpu = step.model_flops / (gpus * step.step_time_s)
    r = step.ranks
    ranks = [
        RankEstimate(
            rank=i,
            chunks=[list(c) for c in r.chunks(i, cfg.pp)],
            time_per_microbatch_s=float(step.rank_time_s[i]),
            memory_gib=float(step.rank_memory_gib[i]),
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
        fits=step.fits,
        over_by_gib=step.over_by_gib,
        time_breakdown_s=TimeBreakdown(**step.time_breakdown_s),
        link_time_s=LinkTime(**step.link_time_s),
        memory_breakdown_gib=MemoryBreakdown(**step.memory_breakdown_gib),
        memory_breakdown_rank=_peak_rank(step),
        pipeline_ranks=ranks,
        config=cfg.model_dump(mode="json"),
        assumptions=_with_mfu_note(assumptions + [n for n in table.model.notes if n not in assumptions]),
    )


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


def estimate(
    *,
    model: Any,
    cluster: Any,
    gpus: int,
    global_batch: int,
    seq_len: int,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    vpp: int = 1,
    micro_batch: int = 1,
    sp: bool | None = None,
    recompute: str = "none",
    zero: int | None = None,
    ep: int = 1,
    schedule: str | None = None,
    attention: str | None = None,
    trace: bool = False,
    target: str | None = None,
    precision: str = "bf16",
    tp_overlap: bool | None = None,
    tp_async: bool | None = None,
    grad_reduce_dtype: str | None = None,
    dp_overlap: bool | None = None,
    compile: bool | None = None,
    loss_fusion: bool | None = None,
    grad_accum_fusion: bool | None = None,
    offload_optimizer: bool | None = None,
    offload_activations: bool | None = None,
    zero3_bucket: int | None = None,
    stage_layers: tuple[int, ...] | list[int] | None = None,
) -> EstimateResult:
    """Predict one configuration (keyword names match ``meshplan estimate`` flags; DP is derived as
    gpus / (tp x pp x cp)). A configuration that does not fit still estimates, with ``fits`` False and
    ``over_by_gib``. ``target`` (native, megatron, torchtitan, deepspeed) models what that engine does;
    ``precision`` fp8 runs the blocks' projections as FP8 GEMMs; the engine knobs (``attention``
    flash/eager, ``tp_overlap``, ``tp_async``, ``grad_reduce_dtype`` bf16/fp32, ``dp_overlap``, ``compile``,
    ``loss_fusion``, ``grad_accum_fusion``, ``offload_*``, ``zero3_bucket`` parameters per ZeRO-3
    collective) default to the engine's own (``planner.knobs``). ``stage_layers``
    gives the model layers of each of the pp x vpp chunks in chunk order (e.g. Llama 3 405B's layout:
    the first chunk only the embedding, the last only the final norm and the head). Raises
    :class:`planner.errors.InputError` for bad input."""
    from planner.inputs import count_problems

    problems = count_problems(gpus=gpus, global_batch=global_batch, seq_len=seq_len, tp=tp, pp=pp, cp=cp, vpp=vpp, micro_batch=micro_batch, ep=ep)
    if sp is not None and not isinstance(sp, bool):
        problems.append(f"sp must be True, False or None, not {type(sp).__name__} {sp!r:.40}")
    if zero is not None and (type(zero) is not int or zero not in (0, 1, 2, 3)):
        problems.append(f"zero must be 0, 1, 2 or 3 (got {zero!r:.40})")
    if not isinstance(recompute, str) or recompute not in ("none", "selective", "full"):
        problems.append(f"recompute must be none, selective or full (got {recompute!r:.40})")
    if not isinstance(trace, bool):
        problems.append(f"trace must be True or False (got {trace!r:.40})")
    if problems:
        raise InputError(*problems)
    model_spec = resolve_model_arg(model, trace)
    cluster_spec = resolve_cluster_arg(cluster)
    settings = dict(
        tp=tp, pp=pp, cp=cp, vpp=vpp, ep=ep, micro_batch=micro_batch, global_batch=global_batch,
        seq_len=seq_len, sp=sp, recompute=recompute, zero=zero, schedule=schedule, attention=attention,
        stage_layers=tuple(stage_layers) if stage_layers is not None else None,
        knobs=dict(
            target=target, precision=precision, tp_overlap=tp_overlap, tp_async=tp_async, grad_reduce_dtype=grad_reduce_dtype,
            dp_overlap=dp_overlap, compile=compile, loss_fusion=loss_fusion, grad_accum_fusion=grad_accum_fusion,
            offload_optimizer=offload_optimizer, offload_activations=offload_activations, zero3_bucket=zero3_bucket,
        ),
    )
    cfg, assumptions = build_config(model_spec, cluster_spec, gpus, **settings)
    return estimate_config(model_spec, cluster_spec, cfg, assumptions)
