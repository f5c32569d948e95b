"""``planner.estimate``: predict one parallel configuration's step time and memory.

The result (:class:`planner.estimation.result.EstimateResult`) is what ``meshplan estimate --json``
prints (DESIGN.md contract).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig
from planner.errors import InputError
from planner.estimation.knobs import knob_settings
from planner.estimation.result import EstimateResult, estimate_config
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
from planner.estimation.config_checks import parallel_problems


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


def _names_groups(cluster: Any) -> bool:
    from planner.intake.groups import names_groups

    return names_groups(cluster)


def _pydantic_problems(err: ValidationError) -> list[str]:
    out = []
    for e in err.errors():
        field = ".".join(str(x) for x in e["loc"]) or "value"
        out.append(f"{field.replace('_', '-')}: {e['msg'].lower()} (got {e.get('input')!r})")
    return out


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
    slow: Any = None,
    down: Any = None,
) -> EstimateResult:
    """Predict one configuration (keyword names match ``meshplan estimate`` flags; DP is derived as
    gpus / (tp x pp x cp)). A configuration that does not fit still estimates, with ``fits`` False and
    ``over_by_gib``. ``target`` (native, megatron, torchtitan, deepspeed) models what that engine does;
    ``precision`` fp8 runs the blocks' projections as FP8 GEMMs; the engine knobs (``attention``
    flash/eager, ``tp_overlap``, ``tp_async``, ``grad_reduce_dtype`` bf16/fp32, ``dp_overlap``, ``compile``,
    ``loss_fusion``, ``grad_accum_fusion``, ``offload_*``, ``zero3_bucket`` parameters per ZeRO-3
    collective) default to the engine's own (``planner.estimation.knobs``). ``stage_layers``
    gives the model layers of each of the pp x vpp chunks in chunk order (e.g. Llama 3 405B's layout:
    the first chunk only the embedding, the last only the final norm and the head). ``cluster`` may
    name GPU groups (``dgx-h100:16,dgx-a100:32``) and ``slow`` / ``down`` degrade it: the configuration
    is then priced as the straggler-bound uniform plan (``planner.estimation.hetero``). Raises
    :class:`planner.errors.InputError` for bad input."""
    from planner.intake.arguments import count_problems

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
    if slow is not None or down is not None or _names_groups(cluster):
        from planner.intake.groups import plain_cluster, resolve_hetero

        hetero = resolve_hetero(cluster, gpus, slow, down)
        plain = plain_cluster(hetero, cluster)  # e.g. --slow 5=1 on a preset: the plain estimate below
        if hetero.is_homogeneous and not plain:  # e.g. --slow 5=1 on one group: exactly the group's own cluster
            cluster = hetero.groups[0].cluster
        elif not plain:
            from planner.estimation.hetero import estimate_on_groups

            others = dict(cp=cp, vpp=vpp, ep=ep, schedule=schedule, attention=attention, target=target, precision=precision,
                          tp_overlap=tp_overlap, tp_async=tp_async, grad_reduce_dtype=grad_reduce_dtype, dp_overlap=dp_overlap,
                          compile=compile, loss_fusion=loss_fusion, grad_accum_fusion=grad_accum_fusion,
                          offload_optimizer=offload_optimizer, offload_activations=offload_activations, zero3_bucket=zero3_bucket)
            return estimate_on_groups(resolve_model_arg(model, trace), hetero, global_batch=global_batch, seq_len=seq_len, tp=tp, pp=pp,
                                      micro_batch=micro_batch, sp=sp, recompute=recompute, zero=zero,
                                      stage_layers=tuple(stage_layers) if stage_layers is not None else None, others=others)
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
