"""Multi-head latent attention (DeepSeek-V2/V3) in the cost model: parameters against transformers'
``DeepseekV3Attention`` / ``DeepseekV2Attention``, FLOPs against Megatron-LM's
``num_floating_point_operations`` MLA terms, Megatron-core's TP split (replicated down-projections and
latent norms), the latent gathers TP moves, and the activations MLA keeps."""

from __future__ import annotations

import pytest
import torch

from costmodel.flops import transformer_fwd_flops
from costmodel.layer_transformer import _tp_input_width, tp_all_reduce, transformer_cost
from costmodel.local import LocalConfig
from costmodel.memory import transformer_activation_bytes
from costmodel.params import mla_params, mla_replicated_params
from costmodel.specs import TransformerLayer
from profiles import load_cluster

H, A, QR, KVR, NOPE, ROPE, V = 7168, 128, 1536, 512, 128, 64, 128  # deepseek-ai/DeepSeek-V3/config.json


def mla(q_lora_rank: int | None = QR, **over: object) -> TransformerLayer:
    fields = dict(hidden_size=H, num_heads=A, num_kv_heads=A, head_dim=NOPE + ROPE, ffn_hidden_size=18432,
                  ffn_act="swiglu", norm="rmsnorm", kv_lora_rank=KVR, q_lora_rank=q_lora_rank,
                  qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=V)
    return TransformerLayer(**(fields | over))


def cfg(tp: int = 1, sp: bool = False, recompute: str = "none") -> LocalConfig:
    return LocalConfig(micro_batch=1, seq_len=4096, tp=tp, cp=1, ep=1, sp=sp, recompute=recompute, flash=True, zero3_group=1)


@pytest.mark.parametrize("q_lora_rank", [QR, None])
def test_params_equal_the_transformers_attention(q_lora_rank: int | None) -> None:
    """DeepseekV3Attention (query latent) and DeepseekV2Attention without one (V2-Lite), on meta."""
    import transformers

    small = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=64, q_lora_rank=q_lora_rank,
                 qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=24, attention_bias=True)
    config_class, attention = ((transformers.DeepseekV3Config, transformers.models.deepseek_v3.modeling_deepseek_v3.DeepseekV3Attention)
                               if q_lora_rank else
                               (transformers.DeepseekV2Config, transformers.models.deepseek_v2.modeling_deepseek_v2.DeepseekV2Attention))
    with torch.device("meta"):
        module = attention(config_class(**small), layer_idx=0)
    layer = TransformerLayer(hidden_size=256, num_heads=4, num_kv_heads=4, head_dim=48, ffn_hidden_size=64, norm="rmsnorm",
                             kv_lora_rank=64, q_lora_rank=q_lora_rank, qk_nope_head_dim=32, qk_rope_head_dim=16,
                             v_head_dim=24, qkv_bias=True, out_bias=True)
    assert mla_params(layer) == sum(p.numel() for p in module.parameters())


def test_deepseek_v3_attention_golden_params() -> None:
    """h·d_c' + d_c' + d_c'·a·192 + h·(d_c + 64) + d_c + d_c·a·256 + a·128·h; of which the down-projections
    and latent norms are replicated on every TP rank."""
    assert mla_params(mla()) == 187_107_328
    assert mla_replicated_params(mla()) == H * QR + QR + H * (KVR + ROPE) + KVR == 15_140_864


def test_flops_match_megatron_num_floating_point_operations() -> None:
    """Megatron-LM ``training.py::num_floating_point_operations`` (MLA branch), per layer and token, forward
    (its 3·2 factor is fwd + bwd and the FMA): q_term ``d_c'·(h + a·(d_h + d_h^R))``, kv
    ``d_c·(h + a·(d_h + d_v)) + h·d_h^R``, o-proj ``a·d_v·h``, core ``s·a·(d_h + d_h^R)/2 + s·a·d_v/2``
    (causal), leaving out its ``+1`` norm terms."""
    s = 4096
    q_term = QR * (H + A * (NOPE + ROPE))
    kv_term = KVR * (H + A * (NOPE + V)) + H * ROPE
    core = s * A * (NOPE + ROPE) / 2 + s * A * V / 2
    megatron = 2 * (q_term + kv_term + A * V * H + core)
    flops = transformer_fwd_flops(mla(), 1.0, s)
    attention = sum(v for k, v in flops.items() if k != "mlp")
    assert attention == pytest.approx(megatron, rel=1e-12)
    without_q_latent = transformer_fwd_flops(mla(None), 1.0, s)
    assert without_q_latent["q"] == 2 * H * A * (NOPE + ROPE) and "q_down" not in without_q_latent


@pytest.mark.parametrize("tp", [2, 8])
def test_tp_splits_the_up_and_output_projections_only(tp: int) -> None:
    """Megatron-core ``multi_latent_attention.py``: ``linear_q_down_proj`` / ``linear_kv_down_proj`` are
    duplicated (with their norms), the up-projections column-parallel, ``linear_proj`` row-parallel."""
    cluster = load_cluster("dgx-a100")
    layer = mla()
    whole, split = transformer_cost(layer, cfg(1), cluster).params, transformer_cost(layer, cfg(tp), cluster).params
    replicated = mla_replicated_params(layer) + 2 * H  # plus the block's two RMSNorms
    assert split == pytest.approx(replicated + (whole - replicated) / tp)


def test_tp_moves_the_latents_not_the_hidden_state_into_attention() -> None:
    """Per pass the attention gathers its latents (d_c' + d_c + d_h^R) and reduces h; the MLP h and h."""
    cluster = load_cluster("dgx-a100")
    layer, c = mla(), cfg(8, sp=True)
    assert _tp_input_width(layer) == QR + KVR + ROPE
    expected = 2 * (tp_all_reduce(cluster, c, (H + QR + KVR + ROPE) / 2) + tp_all_reduce(cluster, c, H))
    assert transformer_cost(layer, c, cluster).comm_link_s["tp"] == pytest.approx(expected)
    gqa = TransformerLayer(hidden_size=H, num_heads=A, num_kv_heads=8, head_dim=128, ffn_hidden_size=18432)
    assert transformer_cost(gqa, c, cluster).comm_link_s["tp"] > expected  # 4 all-reduces of h


@pytest.mark.parametrize("tp, sp", [(1, False), (8, False), (8, True)])
def test_activations_keep_192_wide_q_k_128_wide_v_and_the_latents(tp: int, sp: bool) -> None:
    """Per token: replicated (÷t under SP) norm inputs 4h, attention input 2h, MLP input 2h and the latents
    4d_c' + 4d_c + 2d_h^R; split by t: Q and K 2·a·192 each, V and the attention output 2·a·128 each,
    SwiGLU 6f, FlashAttention's fp32 log-sum-exp 4a."""
    c = cfg(tp, sp)
    stored, _ = transformer_activation_bytes(mla(), c)
    repl = 8 * H + 4 * QR + 4 * KVR + 2 * ROPE
    split = 4 * A * (NOPE + ROPE) + 4 * A * V + 6 * 18432 + 4 * A
    assert stored == pytest.approx(4096 * (repl / (tp if sp else 1) + split / tp))


def test_blocks_without_mla_dump_as_before_and_mla_blocks_round_trip() -> None:
    """The q/k-norm and MLA fields are left out of a dump where they hold their defaults, so plan files'
    ``spec_sha256`` of existing models do not change; an MLA block dumps them and reads back equal."""
    gqa = TransformerLayer(hidden_size=H, num_heads=A, num_kv_heads=8, head_dim=128, ffn_hidden_size=18432)
    assert not {"qk_norm", "kv_lora_rank", "q_lora_rank", "v_head_dim"} & set(gqa.model_dump())
    for layer in (gqa, mla(), mla(None), gqa.model_copy(update={"qk_norm": True})):
        assert TransformerLayer.model_validate_json(layer.model_dump_json()) == layer
    assert mla().model_dump()["kv_lora_rank"] == KVR


def test_an_inconsistent_mla_head_layout_is_refused() -> None:
    with pytest.raises(ValueError, match="qk_nope_head_dim"):
        mla(head_dim=128)
    with pytest.raises(ValueError, match="num_kv_heads"):
        mla(num_kv_heads=8)
