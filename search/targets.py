"""What each engine can express (ecosystem-notes B1-B3, B6), as restrictions on the search space.

Megatron-LM: one TP/CP/DP degree per job, ZeRO-2/3 (Megatron FSDP) only without pipelining, per-stage layer lists (``--pipeline-model-parallel-layout``),
1F1B or interleaved 1F1B, recomputation either one mode for every layer or full recomputation of the
first N layers of every model chunk (``--recompute-method block --recompute-num-layers N``).
DeepSpeed: ZeRO-2/3 are incompatible with pipeline parallelism (``runtime/pipe/engine.py``), stage
splits come from ``partition_method`` (no explicit lists), one activation-checkpoint interval, no
context parallelism, a 1F1B-like schedule. torchtitan: FSDP2 (ZeRO-3) or plain replication, one
activation-checkpoint mode, explicit per-stage module lists, PyTorch's GPipe / 1F1B / interleaved
schedules (no ZB-H1 schedule class of that name).
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
    """TP communication may overlap its GEMMs (Megatron ``--tp-comm-overlap``, which needs SP;
    torchtitan's async TP); DeepSpeed has no such setting."""


RULES: dict[str, TargetRules] = {
    "native": TargetRules((0, 1, 2, 3), (0, 1, 2, 3), ("1f1b", "interleaved-1f1b", "gpipe", "zb-h1"), "per_layer", True, True, (False, True), True),
    "megatron": TargetRules((0, 1, 2, 3), (0, 1), ("1f1b", "interleaved-1f1b"), "block", True, True, (False, True), True),
    "torchtitan": TargetRules((0, 3), (0, 3), ("1f1b", "interleaved-1f1b", "gpipe"), "uniform", True, True, (True,), True),
    "deepspeed": TargetRules((0, 1, 2, 3), (0, 1), ("1f1b",), "uniform", False, False, (False,), False),
}


def rules_for(target: str) -> TargetRules:
    """The rules of ``target`` (native allows everything)."""
    return RULES[target]
