"""Golden tests of the memory-bound backward kernels of a transformer block
(``costmodel.layer_transformer._elementwise_bytes(..., backward=True)`` and the softmax backward), counted
op by op against the fused kernels' reads and writes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from costmodel.layer_transformer import (
    ACTIVATION_BACKWARD_ELEMENTS,
    NORM_BACKWARD_ELEMENTS,
    SOFTMAX_BACKWARD_EXTRA,
    _elementwise_bytes,
    _transformer_compute,
)
from costmodel.kernels import memory_time
from costmodel.specs import EmbeddingLayer, HeadLayer, ModelSpec, NormLayer, ParallelConfig, TransformerLayer
from costmodel.step import local_config
from costmodel.table import build_cost_table
from profiles import load_cluster

A100 = load_cluster("dgx-a100")
H, HEADS, TOKENS = 6144, 64, 2048


def gpt(act: str = "gelu") -> ModelSpec:
    """One Megatron GPT block (biases, dropout, LayerNorm), the 22B model's width."""
    block = TransformerLayer(hidden_size=H, num_heads=HEADS, num_kv_heads=HEADS, head_dim=H // HEADS,
                             ffn_hidden_size=4 * H, ffn_act=act, norm="layernorm", qkv_bias=True, out_bias=True,
                             mlp_bias=True, dropout=True)
    layers = (EmbeddingLayer(vocab_size=51200, hidden_size=H), block, NormLayer(hidden_size=H),
              HeadLayer(vocab_size=51200, hidden_size=H, tied=True))
    return ModelSpec(name="gpt-test", layers=layers, tied_embeddings=True)


def view(sp: bool = False, **cfg):  # noqa: ANN003, ANN201
    model = gpt(cfg.pop("act", "gelu"))
    base = ParallelConfig(tp=8, dp=1, micro_batch=1, global_batch=1, seq_len=TOKENS, sp=sp, attention="eager",
                          engine="megatron", **cfg)
    return model.layers[1], local_config(build_cost_table(model, A100), base, "none")


def test_fused_backward_counts_read_input_and_dy_write_dx() -> None:
    """Per token: 2 norms 3h each, 2 residual-gradient sums 3h each, 2 dropouts 2h each (16h,
    replicated without SP); GELU 3f split by TP. Forward: 2 norms 2h each and 2 fused
    bias-dropout-adds 3h each (10h, the dropout inside the add), and 2f."""
    assert NORM_BACKWARD_ELEMENTS == 1 + 1 + 1
    assert ACTIVATION_BACKWARD_ELEMENTS == {"gelu": 1 + 1 + 1, "swiglu": 3 + 2}
    assert SOFTMAX_BACKWARD_EXTRA == 3 - 2
    layer, cfg = view()
    f = 4 * H
    assert _elementwise_bytes(layer, cfg, backward=True) == pytest.approx(2 * TOKENS * (16 * H + 3 * f / 8))
    assert _elementwise_bytes(layer, cfg) == pytest.approx(2 * TOKENS * (10 * H + 2 * f / 8))
    layer_sp, cfg_sp = view(sp=True)
    assert _elementwise_bytes(layer_sp, cfg_sp, backward=True) == pytest.approx(2 * TOKENS * (16 * H + 3 * f) / 8)
    swiglu, cfg_swiglu = view(act="swiglu")
    assert _elementwise_bytes(swiglu, cfg_swiglu, backward=True) == pytest.approx(2 * TOKENS * (16 * H + 5 * f / 8))


def test_unfused_backward_is_twice_its_forward() -> None:
    """Op by op (Megatron-LM 2019, ``EngineTerms.fused`` False) the backward keeps twice the forward."""
    layer, fused = view()
    cfg = replace(fused, terms=replace(fused.terms, fused=False))
    assert _elementwise_bytes(layer, cfg, backward=True) == pytest.approx(2 * _elementwise_bytes(layer, cfg))
    # Megatron-LM 2019's bias, dropout and add as three ops: 7.5h per branch against the fused 3h
    assert _elementwise_bytes(layer, cfg) - _elementwise_bytes(layer, fused) == pytest.approx(2 * TOKENS * 2 * 4.5 * H)
    fwd, bwd, _, attn = _transformer_compute(layer, cfg, A100)
    fused_fwd, fused_bwd, _, _ = _transformer_compute(*view(), A100)
    assert bwd - fused_bwd > 2 * (fwd - fused_fwd) - 1e-12


def test_block_backward_is_two_gemm_passes_plus_the_counted_backward_bytes() -> None:
    """The block's backward = 2x its GEMMs + 2x the eager attention core + the memory-bound backward:
    elementwise (above) and the softmax / dropout passes over the s x s scores (fused softmax 3 passes,
    dropout 2.5), no longer twice the forward's."""
    layer, cfg = view()
    fwd, bwd, _, attn = _transformer_compute(layer, cfg, A100)
    scores = 2 * TOKENS * (HEADS / 8) * TOKENS
    mem_f = memory_time(A100, _elementwise_bytes(layer, cfg) + (2 + 2.5) * scores, 6)
    mem_b = memory_time(A100, _elementwise_bytes(layer, cfg, backward=True) + (3 + 2.5) * scores, 6)
    attn_f = attn / 3
    gemms = fwd - attn_f - mem_f
    assert bwd == pytest.approx(2 * gemms + 2 * attn_f + mem_b, rel=1e-9)
    assert mem_b < 2 * mem_f
