"""The running unit's unsharded bf16 gradients under FSDP2 ZeRO 0-2 at a layer's backward
(``costmodel.rank_units._layer_unit_bytes``' fourth part, ``costmodel.ranks._peak_grad_params``):
held until the unit's ``post_backward`` copies them into its fp32 reduce-scatter input; a dense
block's backward peaks after its MLP's weight gradients, a MoE block's and the head's before any."""

from __future__ import annotations

import json
from pathlib import Path

from costmodel.engines import engine_terms
from costmodel.rank_memory import FSDP2_LOW_ZERO_UNIT_BYTES, _layer_unit_bytes, _unit_bytes, rank_allocated_bytes
from costmodel.ranks import rank_costs
from costmodel.specs import HeadLayer, ParallelConfig
from costmodel.step import local_config
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

TINY = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4,
        "vocab_size": 128, "max_position_embeddings": 64, "tie_word_embeddings": False}
"""The differential sweep's Llama and Mixtral shape (``tests/planner/runtime/differential_draw.py``)."""
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **TINY}
MIXTRAL = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2, **TINY}
D0000_TRACKER_KIB = 176.32
"""torch's tracker on the sweep's Llama, tp 2, cp 4, ZeRO 2, full recompute, one micro-batch of 8
(case d0000): the peak inside a recomputed block's MLP norm backward, beside its MLP's three 2 KiB
bf16 weight gradients (-5.3 % priced without them, -7.6 % also without the RMSNorm's backward
temporaries, ``costmodel.activations.eager_rmsnorm_backward_bytes``)."""


def _table(tmp_path: Path, config: dict) -> object:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return build_cost_table(resolve_model_arg(str(path)), resolve_cluster_arg("dgx-a100"))


def _cfg(**kw: object) -> ParallelConfig:
    base = dict(micro_batch=8, global_batch=8, seq_len=16, engine="native", recompute="full", sp=False)
    return ParallelConfig(**{**base, **kw})


def test_zero_1_2_price_the_running_units_bf16_gradient_and_zero_3_keeps_its_own() -> None:
    for zero in (1, 2):
        cfg = _cfg(dp=2, zero=zero)
        terms = engine_terms(cfg)
        assert _layer_unit_bytes(cfg, terms, 1.0) == (0.0, 0.0, FSDP2_LOW_ZERO_UNIT_BYTES, cfg.param_bytes)
    three = _cfg(dp=2, zero=3)
    assert _layer_unit_bytes(three, engine_terms(three), 1.0)[3] == 0.0  # its gradient is in the running layer's 2 + 2


def test_a_moe_block_and_the_head_peak_before_their_gradients(tmp_path: Path) -> None:
    """Points of the largest layer (a block) carry its parameters as gradients where dense, none
    where MoE; the head's (as large as the embedding here, whose point carries its own) none."""
    for config, dense in ((LLAMA, True), (MIXTRAL, False)):
        table = _table(tmp_path, config)
        cfg = _cfg(dp=2, zero=2)
        curve = rank_costs(table, cfg, lambda r: local_config(table, cfg, r)).types[0].backward_curve
        head = sum(x.vocab_size * x.hidden_size for x in table.model.layers if isinstance(x, HeadLayer))
        block = max(own for _, _, own, *_ in curve)
        assert {grad for _, _, own, _, _, grad in curve if own == block} == ({block} if dense else {0.0})
        assert {grad for _, _, own, _, _, grad in curve if own == head} == {0.0, head}  # the head's, the embedding's


def test_d0000_is_priced_within_the_band_of_the_tracker(tmp_path: Path) -> None:
    table = _table(tmp_path, {**LLAMA, "num_key_value_heads": 2})
    cfg = _cfg(tp=2, cp=4, zero=2)
    ranks = rank_costs(table, cfg, lambda r: local_config(table, cfg, r))
    assert _unit_bytes(cfg, ranks.types[0], engine_terms(cfg)) > 0
    kib = sum(rank_allocated_bytes(table, cfg, ranks.types[0], 0).values()) / 1024
    assert -0.03 <= kib / D0000_TRACKER_KIB - 1 <= 0.10
