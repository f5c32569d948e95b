"""Parameter counts against published numbers and hand-derived per-layer formulas."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costmodel.specs import (
    EmbeddingLayer,
    GenericLayer,
    HeadLayer,
    NormLayer,
    TransformerLayer,
)
from costmodel.params import (
    attention_params,
    count_active_params,
    count_params,
    expert_params,
    layer_active_params,
    layer_params,
    mlp_params,
)
from planner.intake.models.presets import build_preset

# ---------------------------------------------------------------------------------------------
# Published totals
# ---------------------------------------------------------------------------------------------
# Llama 3.1 model cards / safetensors metadata; Mixtral 8x7B: Jiang et al. 2024 and the HF
# checkpoint (46.7B total, 12.9B active); BLOOM model card ("176,247,271,424 parameters").
EXACT = {
    "llama3.1-8b": 8_030_261_248,
    "llama3.1-70b": 70_553_706_496,
    "llama3.1-405b": 405_853_388_800,
    "mixtral-8x7b": 46_702_792_704,
    "bloom-176b": 176_247_271_424,
    # mosaicml/llm-foundry scripts/train/benchmarking/README.md, NumParams column at seq 2048.
    "mpt-1b": 1_315_950_592,
    "mpt-3b": 2_651_837_440,
    "mpt-7b": 6_658_859_008,
    "mpt-13b": 12_853_954_560,
    "mpt-30b": 29_975_214_080,
    "mpt-70b": 64_862_437_376,
}


@pytest.mark.parametrize(("name", "expected"), sorted(EXACT.items()))
def test_preset_total_matches_published_count(name: str, expected: int) -> None:
    assert count_params(build_preset(name)) == expected


def test_mixtral_active_params() -> None:
    assert count_active_params(build_preset("mixtral-8x7b")) == 12_879_925_248


# shared/reference/published_runs.csv params_b (printed to 0.01B) for the MPT benchmark rows.
@pytest.mark.parametrize(
    ("name", "billions"),
    [("mpt-1b", 1.32), ("mpt-3b", 2.65), ("mpt-7b", 6.66), ("mpt-13b", 12.85),
     ("mpt-30b", 29.98), ("mpt-70b", 64.86)],
)
def test_mpt_matches_published_runs_to_0_01b(name: str, billions: float) -> None:
    assert round(count_params(build_preset(name)) / 1e9, 2) == billions


# Narayanan et al. 2021 Table 1: (preset, layers, hidden, printed billions).
NARAYANAN = [
    ("gpt-1.7b", 24, 2304, 1.7),
    ("gpt-3.6b", 30, 3072, 3.6),
    ("gpt-7.5b", 36, 4096, 7.5),
    ("gpt-18.4b", 40, 6144, 18.4),
    ("gpt-39.1b", 48, 8192, 39.1),
    ("gpt-76.1b", 60, 10240, 76.1),
    ("gpt-145.6b", 80, 12288, 145.6),
    ("gpt-310.1b", 96, 16384, 310.1),
    ("gpt-529.6b", 105, 20480, 529.6),
    ("gpt-1t", 128, 25600, 1008.0),
    ("gpt3-175b", 96, 12288, 174.6),  # §5.2
]


def narayanan_eq2(layers: int, hidden: int, vocab: int = 51200, seq: int = 2048) -> int:
    """Narayanan et al. 2021 eq. 2, P = 12lh²(1 + 13/(12h) + (V+s)/(12lh)), in exact integers."""
    return 12 * layers * hidden**2 + 13 * layers * hidden + (vocab + seq) * hidden


@pytest.mark.parametrize(("name", "layers", "hidden", "billions"), NARAYANAN)
def test_narayanan_table1(name: str, layers: int, hidden: int, billions: float) -> None:
    total = count_params(build_preset(name))
    # eq. 2 leaves out the final LayerNorm (weight + bias, 2h); everything else is identical.
    assert total - 2 * hidden == narayanan_eq2(layers, hidden)
    assert round(total / 1e9, 1) == billions


# NVIDIA/Megatron-LM README H100 table prints rounded sizes (1.7 ... 462) and leaves positions and
# tying unstated: within 2 % or the printed rounding (0.05B), whichever is larger.
@pytest.mark.parametrize(
    ("name", "billions"),
    [("megatron-gpt-1.7b", 1.7), ("megatron-gpt-7.1b", 7.1), ("megatron-gpt-16b", 16),
     ("megatron-gpt-32b", 32), ("megatron-gpt-70b", 70), ("megatron-gpt-119b", 119),
     ("megatron-gpt-177b", 177), ("megatron-gpt-314b", 314), ("megatron-gpt-462b", 462)],
)
def test_megatron_h100_series_near_printed_size(name: str, billions: float) -> None:
    assert count_params(build_preset(name)) / 1e9 == pytest.approx(billions, rel=0.02, abs=0.05)


# ---------------------------------------------------------------------------------------------
# Per-layer formulas (hand-computed)
# ---------------------------------------------------------------------------------------------
def _block(**overrides: object) -> TransformerLayer:
    fields: dict[str, object] = dict(
        hidden_size=8, num_heads=4, num_kv_heads=2, head_dim=2, ffn_hidden_size=16,
        ffn_act="swiglu", norm="rmsnorm",
    )
    fields.update(overrides)
    return TransformerLayer(**fields)


def test_attention_gqa_without_and_with_biases() -> None:
    # q 8x8, k and v 8x4 each, o 8x8 -> 64 + 64 + 64 = 192
    assert attention_params(_block()) == 192
    # + q/k/v biases 8 + 4 + 4, + out bias 8
    assert attention_params(_block(qkv_bias=True, out_bias=True)) == 192 + 16 + 8


def test_attention_head_dim_independent_of_hidden() -> None:
    # Qwen3-style: 4 heads of 4 = 16-wide queries on an 8-wide residual; kv 2 heads of 4.
    assert attention_params(_block(head_dim=4)) == 8 * 16 + 2 * 8 * 8 + 16 * 8


def test_mlp_gated_and_plain_with_bias() -> None:
    assert mlp_params(8, 16, gated=True, bias=False) == 3 * 8 * 16
    assert mlp_params(8, 16, gated=True, bias=True) == 3 * 8 * 16 + 2 * 16 + 8
    assert mlp_params(8, 32, gated=False, bias=True) == 2 * 8 * 32 + 32 + 8


def test_dense_block_norms() -> None:
    rms = layer_params(_block())
    ln = layer_params(_block(norm="layernorm"))
    assert rms == 192 + 3 * 8 * 16 + 2 * 8
    assert ln - rms == 2 * 8  # two LayerNorm biases


def test_moe_block_total_active_and_experts() -> None:
    block = _block(num_experts=4, moe_top_k=2, shared_expert_ffn_hidden_size=8)
    expert = 3 * 8 * 16
    shared = 3 * 8 * 8
    router = 8 * 4
    assert expert_params(block) == 4 * expert
    assert layer_params(block) == 192 + router + 4 * expert + shared + 16
    assert layer_active_params(block) == 192 + router + 2 * expert + shared + 16
    assert expert_params(_block()) == 0


def test_embedding_head_norm_generic() -> None:
    assert layer_params(EmbeddingLayer(vocab_size=10, hidden_size=8)) == 80
    assert layer_params(EmbeddingLayer(vocab_size=10, hidden_size=8, max_positions=4)) == 112
    assert layer_params(EmbeddingLayer(vocab_size=10, hidden_size=8, norm="layernorm")) == 96
    assert layer_params(HeadLayer(vocab_size=10, hidden_size=8, tied=True)) == 0
    assert layer_params(HeadLayer(vocab_size=10, hidden_size=8)) == 80
    assert layer_params(HeadLayer(vocab_size=10, hidden_size=8, bias=True)) == 90
    assert layer_params(NormLayer(hidden_size=8, norm="rmsnorm")) == 8
    assert layer_params(NormLayer(hidden_size=8)) == 16
    generic = GenericLayer(name="conv", params=1234, fwd_flops_per_token=1.0)
    assert layer_params(generic) == layer_active_params(generic) == 1234


@given(
    layers=st.integers(1, 64),
    heads=st.integers(1, 32),
    head_dim=st.sampled_from([32, 64, 128]),
    vocab=st.integers(1, 200_000),
)
def test_gpt_style_presets_follow_eq2(layers: int, heads: int, head_dim: int, vocab: int) -> None:
    from planner.intake.models.builder import decoder_lm

    hidden = heads * head_dim
    block = TransformerLayer(
        hidden_size=hidden, num_heads=heads, num_kv_heads=heads, head_dim=head_dim,
        ffn_hidden_size=4 * hidden, qkv_bias=True, out_bias=True, mlp_bias=True,
    )
    spec = decoder_lm("g", blocks=[block] * layers, vocab_size=vocab, tied_embeddings=True,
                      max_seq_len=1024, source="test", learned_positions=1024)
    total = count_params(spec)
    assert total == narayanan_eq2(layers, hidden, vocab, 1024) + 2 * hidden
    assert count_active_params(spec) == total
