"""Layers of a fixed length (issue 25: Whisper's 1,500-frame encoder while ``--seq-len`` counts
decoder tokens) and cross-attention over a fixed-length encoder."""

from __future__ import annotations

import pytest

from costmodel.flops import layer_fwd_flops, model_flops_per_step, transformer_fwd_flops
from costmodel.layer_cost import layer_cost
from costmodel.local import LocalConfig
from costmodel.specs import GenericLayer, TransformerLayer
from profiles import load_cluster

# openai/whisper-small: d_model 768, 12 heads, FFN 3072, encoder of 1,500 positions
ENCODER = TransformerLayer(hidden_size=768, num_heads=12, num_kv_heads=12, head_dim=64, ffn_hidden_size=3072,
                           causal=False, fixed_seq_len=1500)
DECODER = TransformerLayer(hidden_size=768, num_heads=12, num_kv_heads=12, head_dim=64, ffn_hidden_size=3072,
                           cross_attention=True, cross_seq_len=1500)


def _cfg(seq_len: int) -> LocalConfig:
    return LocalConfig(micro_batch=2, seq_len=seq_len, tp=2, cp=1, ep=1, sp=True, recompute="none", flash=True,
                       zero3_group=1)


def test_an_encoder_of_fixed_length_costs_the_same_at_any_decoder_length() -> None:
    per_step = [model_flops_per_step((ENCODER,), 4, s) for s in (32, 448, 1500)]
    assert per_step[0] == per_step[1] == per_step[2]
    # 3 x forward over 4 samples of 1,500 non-causal positions: 24·B·s·h² + 4·B·s²·h (Narayanan et al.)
    b, s, h = 4, 1500, 768
    assert per_step[0] == pytest.approx(3 * (24 * b * s * h * h + 4 * b * s * s * h))
    cluster = load_cluster("dgx-a100")
    plain = ENCODER.model_copy(update={"fixed_seq_len": 0})
    assert layer_cost(ENCODER, _cfg(448), cluster) == layer_cost(plain, _cfg(1500), cluster)


def test_cross_attention_projects_each_encoder_position_once() -> None:
    """Q and O per decoder token, K and V per encoder position, QKᵀ and PV over the encoder."""
    tokens, seq = 2 * 448, 448
    h, enc = 768, 1500
    cross = transformer_fwd_flops(DECODER, tokens, seq)["cross"]
    assert cross == pytest.approx(2 * tokens * 2 * h * h + 2 * (2 * enc) * 2 * h * h + 2 * tokens * enc * 2 * h)
    t5_like = DECODER.model_copy(update={"cross_seq_len": 0})  # T5: encoder as long as the decoder
    assert transformer_fwd_flops(t5_like, tokens, seq)["cross"] == pytest.approx(2 * tokens * (4 * h * h + seq * 2 * h))


def test_defaults_dump_as_before() -> None:
    generic = GenericLayer(name="g", params=1, fwd_flops_per_token=1.0)
    assert "fixed_seq_len" not in generic.model_dump()
    assert "fixed_seq_len" not in TransformerLayer(hidden_size=8, num_heads=1, num_kv_heads=1, head_dim=8,
                                                   ffn_hidden_size=8).model_dump()
    fixed = generic.model_copy(update={"fixed_seq_len": 1500})
    assert fixed.model_dump()["fixed_seq_len"] == 1500
    assert layer_fwd_flops(fixed, 1500.0, 1500) == 1500.0
