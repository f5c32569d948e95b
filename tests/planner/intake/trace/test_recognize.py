"""Recognising transformer blocks: attention widths, MLP kind, experts, norms, biases, causality."""

from __future__ import annotations

import torch
from torch import nn

from costmodel.params import layer_params
from planner.intake.trace.recognize import DEFAULT_TOP_K, recognize_block
from planner.intake.trace.units import count_params


def _meta(build):
    with torch.device("meta"):
        return build()


def test_gpt_block_from_structure_and_attributes(zoo) -> None:
    block = _meta(lambda: zoo.GPTBlock(64, 4))
    layer, surplus = recognize_block(block, "blocks.0", [], name="b", lm=True)
    assert (layer.hidden_size, layer.num_heads, layer.num_kv_heads, layer.head_dim) == (64, 4, 4, 16)
    assert (layer.ffn_hidden_size, layer.ffn_act, layer.norm) == (256, "gelu", "layernorm")
    assert layer.qkv_bias and layer.out_bias and layer.mlp_bias and layer.causal
    assert surplus == 0 and layer_params(layer) == count_params(block)


def test_mixtral_block_gqa_experts_router_and_top_k(zoo) -> None:
    block = _meta(lambda: zoo.MoeBlock(64, 8, 2, 224, 8, 2))
    layer, surplus = recognize_block(block, "layers.0", [], name="b", lm=True)
    assert (layer.num_heads, layer.num_kv_heads, layer.head_dim) == (8, 2, 8)
    assert (layer.num_experts, layer.moe_top_k, layer.ffn_hidden_size, layer.ffn_act) == (8, 2, 224, "swiglu")
    assert layer.norm == "rmsnorm" and not layer.qkv_bias and surplus == 0


def test_top_k_defaults_to_two_without_an_attribute(zoo) -> None:
    block = _meta(lambda: zoo.MoeBlock(64, 8, 2, 224, 4, 1))
    del block.block_sparse_moe.top_k
    layer, _ = recognize_block(block, "layers.0", [], name="b", lm=True)
    assert layer.moe_top_k == DEFAULT_TOP_K


def test_fused_expert_weights_are_experts() -> None:
    class Experts(nn.Module):  # Hugging Face MixtralExperts: (E, 2f, h) and (E, h, f)
        def __init__(self) -> None:
            super().__init__()
            self.gate_up_proj = nn.Parameter(torch.empty(4, 2 * 48, 32))
            self.down_proj = nn.Parameter(torch.empty(4, 32, 48))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1, self.norm2 = nn.RMSNorm(32), nn.RMSNorm(32)
            self.attn = nn.ModuleDict({n: nn.Linear(32, 32, bias=False) for n in ("q", "k", "v", "o")})
            self.attn.head_dim = 8
            self.moe = nn.ModuleDict({"router": nn.Linear(32, 4, bias=False), "experts": Experts()})

    layer, surplus = recognize_block(_meta(Block), "b", [], name="b", lm=True)
    assert (layer.num_experts, layer.ffn_hidden_size, layer.ffn_act, layer.num_heads) == (4, 48, "swiglu", 4)
    assert surplus == 0


def test_t5_style_blocks_encoder_not_causal_decoder_cross(zoo) -> None:
    encoder = _meta(lambda: zoo.T5Block(64, 4, 256, decoder=False))
    decoder = _meta(lambda: zoo.T5Block(64, 4, 256, decoder=True))
    enc, _ = recognize_block(encoder, "encoder.0", [], name="e", lm=True)
    dec, _ = recognize_block(decoder, "decoder.0", [], name="d", lm=True)
    assert not enc.causal and not enc.cross_attention and enc.ffn_act == "gelu"  # no trace: no relu seen
    assert dec.causal and dec.cross_attention
    assert layer_params(dec) == count_params(decoder) and layer_params(enc) == count_params(encoder)


def test_multihead_attention_module(zoo) -> None:
    block = _meta(lambda: zoo.ViTBlock(96, 4, 384))
    layer, surplus = recognize_block(block, "layers.0", [], name="v", lm=False)
    assert (layer.num_heads, layer.head_dim, layer.qkv_bias, layer.causal, layer.dropout) == (4, 24, True, False, True)
    assert surplus == 0


def test_extra_parameters_are_surplus_and_odd_blocks_are_not_transformers(zoo) -> None:
    block = _meta(lambda: zoo.GPTBlock(64, 4))
    block.register_parameter("scale", nn.Parameter(torch.empty(64, device="meta")))
    layer, surplus = recognize_block(block, "b", [], name="b", lm=True)
    assert surplus == 64 and layer_params(layer) + surplus == count_params(block)
    block.mlp.append(nn.Linear(64, 64, device="meta"))  # three projections, not a gated MLP
    assert "not a plain, gated or fused gate-up MLP" in recognize_block(block, "b", [], name="b", lm=True)
