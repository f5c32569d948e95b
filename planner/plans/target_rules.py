"""The validator's target rules: what each engine's launcher cannot express, checked apart from the
search (``search.targets`` states the same rules for the search space; this module imports nothing
from ``search``), and the engine's own exporter as the last word.

Rules (ecosystem-notes B1-B3, B6, and each exporter's refusals in ``planner/outputs/export``):
megatron: ZeRO-2/3 only without pipelining; 1f1b or interleaved; one recompute mode for every layer,
or full recomputation of the first N layers of every chunk; the final norm and the output head in
one chunk (the layout's loss stage ``L``). deepspeed: ZeRO <= 1 with pp > 1; no ZeRO-3 for MoE
models (``runtime/engine.py`` ``_validate_zero3_moe_compatibility``); the split DeepSpeed's
``PipelineModule`` makes (``costmodel.table.deepspeed_stage_layers``); recompute none or full for every
layer; no cp, no sp, no tp overlap; 1f1b. torchtitan: ZeRO 0 or 3 (FSDP2); ep dividing the sharded dp
(dp under ZeRO-3, else 1) x cp (``ParallelDims``); one recompute mode; sp with every tp > 1; no zb-h1;
tp overlap only as async TP, which needs torch.compile (``CompileConfig.__post_init__``).
native: what the native runtime (``planner.runtime``, torch.distributed.pipelining, FSDP2, DTensor)
runs, each a named rule (``native rule <name>: ...``, :data:`NATIVE_RULES`).
"""

from __future__ import annotations

from typing import Any

from costmodel.specs import GenericLayer, HeadLayer, ModelSpec, NormLayer, ParallelConfig, TransformerLayer
from costmodel.table import deepspeed_stage_layers, default_stage_layers
from planner.errors import InputError
from planner.plans.native_rules import native_rule
from planner.plans.schema import Plan


def stage_sizes(cfg: ParallelConfig, model: ModelSpec) -> tuple[int, ...]:
    """Layers per chunk of ``cfg`` (its explicit split, or the default one)."""
    return cfg.stage_layers or default_stage_layers(model, cfg.pp * cfg.vpp)


def layer_modes(cfg: ParallelConfig, model: ModelSpec) -> tuple[str, ...]:
    """Recomputation of every layer as the cost model applies it."""
    if cfg.layer_recompute is not None:
        return cfg.layer_recompute
    return tuple(cfg.recompute if recomputable(x) else "none" for x in model.layers)


def recomputable(layer: Any) -> bool:
    """Layers whose activations can be recomputed (blocks and generic layers)."""
    return isinstance(layer, (TransformerLayer, GenericLayer))


def target_problems(target: str, cfg: ParallelConfig, model: ModelSpec) -> list[str]:
    """What ``target`` cannot express (see the module docstring), and a plan estimated on another
    engine than its target's (``config.engine``, whose behaviour ``costmodel.engines`` applies)."""
    modes = {m for m, x in zip(layer_modes(cfg, model), model.layers) if recomputable(x)}
    checks = {"megatron": _megatron, "deepspeed": _deepspeed, "torchtitan": _torchtitan, "native": _native}
    out = checks[target](cfg, model, modes) if target in checks else []
    if cfg.engine != target:
        out.append(f"config.engine {cfg.engine} is not the plan's target {target}: the estimate must model the engine the plan runs on; re-plan it")
    if cfg.tp_comm_overlap and not (cfg.sp and cfg.tp > 1):
        out.append("tp communication overlap needs sequence parallelism with tp > 1 (Megatron --tp-comm-overlap requires --sequence-parallel)")
    if target in ("deepspeed", "torchtitan") and len(modes) > 1:
        out.append(f"{target} takes one activation-checkpointing mode for every layer, not a per-layer mix")
    return out


def _megatron(cfg: ParallelConfig, model: ModelSpec, modes: set[str]) -> list[str]:
    out = []
    if cfg.pp > 1 and cfg.zero > 1:
        out.append(f"megatron runs ZeRO-{cfg.zero} (Megatron FSDP) only without pipelining (pp {cfg.pp}; use zero 0 or 1)")
    if cfg.schedule not in ("1f1b", "interleaved-1f1b"):
        out.append(f"megatron runs 1f1b or interleaved-1f1b, not {cfg.schedule}")
    if len(modes) > 1 and not block_recompute(cfg, model):
        out.append("megatron recomputes one mode for every layer, or fully the first N layers of every chunk (--recompute-method block)")
    n, ends = len(model.layers), _boundaries(stage_sizes(cfg, model))
    if n >= 2 and isinstance(model.layers[-2], NormLayer) and isinstance(model.layers[-1], HeadLayer) and n - 1 in ends:
        out.append("megatron runs the final norm and the output head in one stage (the layout's loss stage L); the split parts them")
    return out


def _deepspeed(cfg: ParallelConfig, model: ModelSpec, modes: set[str]) -> list[str]:
    out = []
    if cfg.pp > 1 and cfg.zero > 1:
        out.append(f"deepspeed forbids ZeRO-{cfg.zero} with pipeline parallelism (pp {cfg.pp}; use zero 0 or 1)")
    if cfg.zero == 3 and any(isinstance(x, TransformerLayer) and x.is_moe for x in model.layers):
        out.append("deepspeed refuses native mixture-of-experts layers under ZeRO-3 (use zero 2 or less)")
    chunks = cfg.pp * cfg.vpp
    if chunks > 1 and tuple(stage_sizes(cfg, model)) != deepspeed_stage_layers(model, chunks):
        out.append(f"deepspeed splits the layers {list(deepspeed_stage_layers(model, chunks))} (PipelineModule's partition), "
                   f"not {list(stage_sizes(cfg, model))}")
    if "selective" in modes:
        out.append("deepspeed checkpoints whole layers: recompute none or full, not selective")
    if cfg.cp > 1:
        out.append(f"deepspeed has no context parallelism (cp {cfg.cp})")
    if cfg.sp:
        out.append("deepspeed has no Megatron-style sequence parallelism setting (sp)")
    if cfg.schedule != "1f1b":
        out.append(f"deepspeed runs 1f1b, not {cfg.schedule}")
    if cfg.tp_comm_overlap:
        out.append("deepspeed has no tp communication overlap setting")
    return out


def _torchtitan(cfg: ParallelConfig, model: ModelSpec, modes: set[str]) -> list[str]:
    out = []
    if cfg.zero not in (0, 3):
        out.append(f"torchtitan shards with FSDP2 (zero 3) or not at all (zero 0), not zero {cfg.zero}")
    shard = cfg.dp if cfg.zero == 3 else 1
    if (shard * cfg.cp) % cfg.ep:
        out.append(f"torchtitan takes ep {cfg.ep} out of data_parallel_shard {shard} x cp {cfg.cp}, which it does not divide")
    if cfg.schedule == "zb-h1":
        out.append("torchtitan has no zb-h1 schedule")
    if cfg.tp > 1 and not cfg.sp:
        out.append("torchtitan applies sequence parallelism with every tp > 1 (sp must be on)")
    if cfg.tp_comm_overlap and cfg.compile is not True:
        out.append("torchtitan overlaps tp communication only as async TP, which needs torch.compile (config.compile true)")
    return out


def _native(cfg: ParallelConfig, model: ModelSpec, modes: set[str]) -> list[str]:
    out = []
    if cfg.schedule == "zb-h1" and cfg.pp > 1:
        n = cfg.global_batch // (cfg.micro_batch * cfg.dp)
        if "selective" in modes:
            out.append(native_rule("native-zb-h1-selective", "selective recomputation"))
        if cfg.zero == 3:
            out.append(native_rule("native-zb-h1-zero3", "zero 3"))
        if n % max(1, n // cfg.pp):
            out.append(native_rule("native-zb-h1-rounds", f"{n} micro-batches, pp {cfg.pp}: {max(1, n // cfg.pp)} rounds"))
    return out


def _boundaries(sizes: tuple[int, ...]) -> set[int]:
    out, total = set(), 0
    for s in sizes[:-1]:
        total += s
        out.add(total)
    return out


def block_recompute(cfg: ParallelConfig, model: ModelSpec) -> bool:
    """Full recomputation of the first N recomputable layers of every chunk, none elsewhere."""
    modes, sizes = layer_modes(cfg, model), stage_sizes(cfg, model)
    starts = [0]
    for s in sizes:
        starts.append(starts[-1] + s)
    chunks = [[modes[i] for i in range(a, b) if recomputable(model.layers[i])] for a, b in zip(starts, starts[1:])]
    counts = [len(ch) - ch[::-1].index("full") if "full" in ch else 0 for ch in chunks]
    if any(ch != ["full"] * k + ["none"] * (len(ch) - k) for ch, k in zip(chunks, counts)):
        return False
    top = max(counts, default=0)
    return all(k == min(top, len(ch)) for ch, k in zip(chunks, counts))


def export_problems(plan: Plan, model: ModelSpec) -> list[str]:
    """The refusal of the target's own exporter, if any (a plan for an engine must export to it)."""
    target = plan.request.target
    if target == "native":
        return []
    from planner.plans.engines.engines import engine_export

    try:
        engine_export(plan, target, model)
    except InputError as err:
        return [str(err)]
    return []
