"""What each engine can express (ecosystem-notes B1-B3, B6), as restrictions on the search space.

Each rule is a refusal of the target's exporter (``planner/outputs/export``), so that the search never
proposes a plan its target cannot launch:

Megatron-LM: one TP/CP/DP degree per job, ZeRO-2/3 (Megatron FSDP) only without pipelining, per-stage
layer lists (``--pipeline-model-parallel-layout``, whose loss stage ``L`` holds the final norm and the
output head together), 1F1B or interleaved 1F1B, recomputation either one mode for every layer or
full recomputation of the first N layers of every model chunk (``--recompute-method block
--recompute-num-layers N``).
DeepSpeed: ZeRO-2/3 are incompatible with pipeline parallelism (``runtime/pipe/engine.py``), native
MoE layers are refused under ZeRO-3 (``runtime/engine.py`` ``_validate_zero3_moe_compatibility``),
stage splits are ``PipelineModule``'s own (``costmodel.table.deepspeed_stage_layers``), one
activation-checkpoint interval (whole layers: no selective recomputation), no context parallelism, a
1F1B-like schedule.
torchtitan: FSDP2 (ZeRO-3) or plain replication, the expert degree inside data_parallel_shard x
context_parallel (``ParallelDims``), one activation-checkpoint mode, explicit per-stage module lists,
PyTorch's GPipe / 1F1B / interleaved schedules (no ZB-H1 schedule class of that name).

Each target also names the engine the plan runs on (``ParallelConfig.engine``, whose behaviour the
cost model applies: ``costmodel.engines``) and the overlap settings that engine runs with as the
plan's export writes them (:func:`engine_fields`), so that the search estimates what the exported
job does and ``meshplan estimate --plan`` reproduces the plan's step time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from costmodel.specs import HeadLayer, ModelSpec, NormLayer

RecomputePolicy = Literal["per_layer", "block", "uniform"]
ALL_MODES = ("none", "selective", "full")


@dataclass(frozen=True)
class TargetRules:
    """The part of the space one engine can express."""

    zero: tuple[int, ...]
    zero_with_pp: tuple[int, ...]
    schedules: tuple[str, ...]
    recompute: RecomputePolicy
    explicit_splits: bool
    context_parallel: bool
    sequence_parallel: tuple[bool, ...]
    """SP settings with tp > 1: DeepSpeed has no key for Megatron-style SP; torchtitan always applies
    it with TP (its TP plan shards the norms' sequence)."""
    tp_comm_overlap: bool
    """TP communication may overlap its GEMMs (Megatron ``--tp-comm-overlap``, which needs SP).
    DeepSpeed has no such setting; torchtitan's async TP needs torch.compile
    (``CompileConfig.__post_init__`` in torchtitan/config/configs.py), which is off by default, so
    its plans overlap only when compiled (:func:`tp_overlap_allowed`)."""
    recompute_modes: tuple[str, ...] = ALL_MODES
    """Recomputation modes the engine has (DeepSpeed checkpoints whole layers only)."""
    moe_zero: tuple[int, ...] = (0, 1, 2, 3)
    """ZeRO stages allowed for a mixture-of-experts model."""
    ep_within_shard: bool = False
    """The expert degree must divide the FSDP-sharded data-parallel degree times cp (torchtitan
    carves EP out of ``dp_shard x cp``; replication, ZeRO-0, gives a shard degree of 1)."""
    split: Literal["explicit", "deepspeed"] = "explicit"
    """``deepspeed``: the stage split is :func:`costmodel.table.deepspeed_stage_layers`."""
    expert_parallel: bool = True
    """The engine shards experts over an EP group (ep > 1)."""
    moe_sequence_parallel: bool = True
    """The engine runs sequence parallelism through mixture-of-experts blocks."""
    runtime_schedules: bool = False
    """The schedule must be one ``torch.distributed.pipelining`` runs as the native runtime builds
    it (:func:`native_schedule_allowed`)."""


RULES: dict[str, TargetRules] = {
    "native": TargetRules((0, 1, 2, 3), (0, 1, 2, 3), ("1f1b", "interleaved-1f1b", "gpipe", "zb-h1"), "per_layer", True, True, (False, True), True,
                          runtime_schedules=True),
    "megatron": TargetRules((0, 1, 2, 3), (0, 1), ("1f1b", "interleaved-1f1b"), "block", True, True, (False, True), True),
    "torchtitan": TargetRules((0, 3), (0, 3), ("1f1b", "interleaved-1f1b", "gpipe"), "uniform", True, True, (True,), False, ep_within_shard=True),
    "deepspeed": TargetRules((0, 1, 2, 3), (0, 1), ("1f1b",), "uniform", False, False, (False,), False,
                             recompute_modes=("none", "full"), moe_zero=(0, 1, 2), split="deepspeed"),
}


def tp_overlap_allowed(rules: TargetRules, target: str, compile: bool | None) -> bool:
    """Whether ``target``'s plans may overlap TP communication with its GEMMs: where the engine has
    the setting (:attr:`TargetRules.tp_comm_overlap`), and for torchtitan when the plan compiles
    (async TP, ``compile.enable_async_tensor_parallel``, needs ``compile.enable``)."""
    return rules.tp_comm_overlap or (target == "torchtitan" and compile is True)


def rules_for(target: str) -> TargetRules:
    """The rules of ``target`` (native: what ``planner.runtime`` runs)."""
    return RULES[target]


def native_schedule_allowed(schedule: str, pp: int, num_microbatches: int, recompute: str | None = None) -> bool:
    """Whether the native runtime runs ``schedule`` (the rules ``native-zb-h1-rounds`` and
    ``native-zb-h1-selective`` of ``planner.plans.native_rules``): torch's
    ``ScheduleInterleavedZeroBubble`` needs the micro-batches a multiple of its rounds, max(1, n // pp)
    (torch/distributed/pipelining/schedules.py), and runs two backwards through each layer (input,
    then weight gradients), which selective activation checkpointing refuses (``recompute`` is the
    mode the constraints fix, if any; :func:`native_zb_modes` keeps the search's own choice apart)."""
    if schedule != "zb-h1" or pp == 1:
        return True
    return num_microbatches % max(1, num_microbatches // pp) == 0 and recompute != "selective"


def native_zero_allowed(rules: TargetRules, schedule: str, pp: int, zero: int) -> bool:
    """Whether the native runtime runs ``schedule`` under ZeRO stage ``zero`` (the rule
    ``native-zb-h1-zero3`` of ``planner.plans.native_rules``): torch's zero-bubble weight pass takes
    gradients with respect to parameters that FSDP2 has resharded under ZeRO 3, and finds none."""
    return not (rules.runtime_schedules and schedule == "zb-h1" and pp > 1 and zero == 3)


def native_zb_modes(rules: TargetRules, schedule: str, pp: int) -> list[tuple[int, ...]] | None:
    """Recomputation the search may choose for a native zero-bubble pipeline: one mode for every
    layer, none or full (``native-zb-h1-selective``: no selective checkpointing; codes of
    ``costmodel.table.RECOMPUTE_CODES``); None where the target's own policy applies."""
    if not rules.runtime_schedules or schedule != "zb-h1" or pp == 1:
        return None
    return [(0,), (2,)]


def zero_allowed(rules: TargetRules, zero: int, pp: int, dp: int, cp: int, ep: int, moe: bool) -> bool:
    """Whether ``rules`` let a mesh (pp, dp, cp, ep) of a model (MoE or not) use ZeRO stage ``zero``."""
    if zero not in (rules.zero_with_pp if pp > 1 else rules.zero) or (moe and zero not in rules.moe_zero):
        return False
    return not rules.ep_within_shard or ((dp if zero == 3 else 1) * cp) % ep == 0


def forbidden_cuts(target: str, model: ModelSpec) -> frozenset[int]:
    """Stage boundaries b (a chunk ends before layer b) the target cannot express: Megatron-LM's
    layout runs the final norm and the output head in one loss stage (``L``), so no cut between them."""
    layers = model.layers
    if target == "megatron" and len(layers) >= 2 and isinstance(layers[-2], NormLayer) and isinstance(layers[-1], HeadLayer):
        return frozenset({len(layers) - 1})
    return frozenset()
def engine_fields(target: str, zero: int) -> dict[str, object]:
    """``ParallelConfig`` fields of a ``target`` plan with ZeRO stage ``zero``: the engine (``native``
    for the native target) and its data-parallel overlap as the export sets it.

    DeepSpeed reduces gradients behind the backward only through ``zero_optimization.overlap_comm``,
    which stages 1-3 have and the export writes from ``overlap_grad_reduce``; without ZeRO the engine
    all-reduces after the backward (``DeepSpeedEngine.allreduce_gradients`` ->
    ``buffered_allreduce_fallback`` at the accumulation boundary, deepspeed/runtime/engine.py).
    Stages 1-2 all-gather the updated parameters inside the optimizer step
    (``DeepSpeedZeroOptimizer.step`` -> ``all_gather_dp_groups``, deepspeed/runtime/zero/
    stage_1_and_2.py), not behind the next forward; stage 3 prefetches them. Megatron-LM's export
    writes ``--overlap-grad-reduce`` / ``--overlap-param-gather`` and torchtitan's FSDP2 prefetches,
    so both keep the overlapped defaults."""
    fields: dict[str, object] = {"engine": target}
    if target == "deepspeed":
        fields["overlap_grad_reduce"] = zero >= 1
        fields["overlap_param_gather"] = zero == 3
    return fields
