"""Under expert parallelism the native runtime makes each MoE block's experts an FSDP2 unit of their
own, reduced before the block's other parameters: the fp32 reduce-scatter input the next layer's
backward holds is the block's non-expert one (``costmodel.ranks._reduced_last_params``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from costmodel.rank_memory import rank_allocated_bytes
from costmodel.ranks import _reduced_last_params, backward_curve, rank_costs
from costmodel.specs import ParallelConfig
from costmodel.step import local_config
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

MIXTRAL = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 32, "intermediate_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": 128,
           "num_local_experts": 4, "num_experts_per_tok": 2, "max_position_embeddings": 64, "tie_word_embeddings": False}
"""The differential sweep's Mixtral (``tests/planner/runtime/differential_draw.py``)."""
TRACKER_KIB = {0: 700.98, 1: 717.00}
"""torch's tracker (``meshplan check-memory``) on it, pp 2, cp 2, ep 2, ZeRO 0, full recompute, ZB-H1,
one micro-batch of 8 at sequence 16, per pipeline rank: case d0118 at draw seed 1."""


def test_the_held_input_is_the_non_expert_part_only_under_expert_parallelism() -> None:
    params, experts = np.array([4096.0, 15552.0, 15552.0]), np.array([0.0, 12288.0, 12288.0])
    assert _reduced_last_params(params, experts, True).tolist() == [4096.0, 3264.0, 3264.0]
    assert _reduced_last_params(params, experts, False).tolist() == params.tolist()


def test_the_curve_names_the_unit_reduced_last_before_each_layer() -> None:
    acts, works = np.full(3, 4.0), np.full(3, 1.0)
    params, reduced = np.array([10.0, 30.0, 30.0]), np.array([10.0, 6.0, 6.0])
    recomputed = np.zeros(3, dtype=bool)
    befores = {point[4] for point in backward_curve(acts, works, params, recomputed, reduced=reduced)}
    assert befores == {0.0, 6.0}  # the last block first (none before it), then the blocks' non-expert part
    assert {point[4] for point in backward_curve(acts, works, params, recomputed)} == {0.0, 30.0}


@pytest.mark.parametrize("rank", sorted(TRACKER_KIB))
def test_the_mixtral_at_ep_2_is_priced_within_the_band_of_the_tracker(tmp_path: Path, rank: int) -> None:
    config = tmp_path / "mixtral.json"
    config.write_text(json.dumps(MIXTRAL))
    table = build_cost_table(resolve_model_arg(str(config)), resolve_cluster_arg("dgx-a100"))
    cfg = ParallelConfig(pp=2, cp=2, ep=2, zero=0, recompute="full", schedule="zb-h1", micro_batch=8, global_batch=8,
                         seq_len=16, engine="native")
    ranks = rank_costs(table, cfg, lambda recompute: local_config(table, cfg, recompute))
    t = ranks.types[ranks.rank_type[rank]]
    kib = sum(rank_allocated_bytes(table, cfg, t, rank).values()) / 1024
    assert -0.03 <= kib / TRACKER_KIB[rank] - 1 <= 0.10
