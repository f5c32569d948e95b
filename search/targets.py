"""What each engine can express (ecosystem-notes B1-B3, B6), as restrictions on the search space.

Megatron-LM: one TP/CP/DP degree per job, ZeRO-2/3 (Megatron FSDP) only without pipelining, per-stage layer lists (``--pipeline-model-parallel-layout``),
1F1B or interleaved 1F1B, recomputation either one mode for every layer or full recomputation of the
first N layers of every model chunk (``--recompute-method block --recompute-num-layers N``).
DeepSpeed: ZeRO-2/3 are incompatible with pipeline parallelism (``runtime/pipe/engine.py``), stage
splits come from ``partition_method`` (no explicit lists), one activation-checkpoint interval, no
context parallelism, a 1F1B-like schedule. torchtitan: FSDP2 (ZeRO-3) or plain replication, one
activation-checkpoint mode, explicit per-stage module lists, PyTorch's GPipe / 1F1B / interleaved
schedules (no ZB-H1 schedule class of that name).

Each target also names the engine the plan runs on (``ParallelConfig.engine``, whose behaviour the
cost model applies: ``costmodel.engines``) and the overlap settings that engine runs with as the
plan's export writes them (:func:`engine_fields`), so that the search estimates what the exported
job does and ``meshplan estimate --plan`` reproduces the plan's step time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RecomputePolicy = Literal["per_layer", "block", "uniform"]


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
    (``CompileConfig.__post_init__`` in torchtitan/config/configs.py), which is off by default and
    which its export does not turn on, so its plans run the TP collectives synchronously."""
    recompute_modes: tuple[str, ...] = ("none", "selective", "full")
    """Recomputation modes the engine has: DeepSpeed checkpoints whole layers
    (``activation_checkpoint_interval``, ``deepspeed.checkpointing``), no selective mode."""


RULES: dict[str, TargetRules] = {
    "native": TargetRules((0, 1, 2, 3), (0, 1, 2, 3), ("1f1b", "interleaved-1f1b", "gpipe", "zb-h1"), "per_layer", True, True, (False, True), True),
    "megatron": TargetRules((0, 1, 2, 3), (0, 1), ("1f1b", "interleaved-1f1b"), "block", True, True, (False, True), True),
    "torchtitan": TargetRules((0, 3), (0, 3), ("1f1b", "interleaved-1f1b", "gpipe"), "uniform", True, True, (True,), False),
    "deepspeed": TargetRules((0, 1, 2, 3), (0, 1), ("1f1b",), "uniform", False, False, (False,), False, ("none", "full")),
}


def rules_for(target: str) -> TargetRules:
    """The rules of ``target`` (native allows everything)."""
    return RULES[target]


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
