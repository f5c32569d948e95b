"""Golden tests of the cost model's published formulas: Megatron's bytes per parameter, the ZeRO
paper's model-state memory, Korthikanti et al.'s activation memory, the pipeline bubble fractions,
and Narayanan's FLOP count."""

from __future__ import annotations

import pytest

from costmodel.flops import model_flops_per_step
from costmodel.local import LocalConfig
from costmodel.memory import korthikanti_layer_bytes, model_state_bytes, transformer_activation_bytes
from costmodel.pipeline import bubble_fraction
from costmodel.specs import EmbeddingLayer, HeadLayer, NormLayer, TransformerLayer

PSI = 1_000_000.0


@pytest.mark.parametrize("d", [1, 8, 64])
def test_megatron_bytes_per_parameter(d: int) -> None:
    """bf16 params, fp32 main grads, Adam: 18 B/param, 6 + 12/d with the distributed optimizer."""
    assert sum(model_state_bytes(PSI, d, 0, 2, 4, 12)) == pytest.approx(18 * PSI)
    assert sum(model_state_bytes(PSI, d, 1, 2, 4, 12)) == pytest.approx((6 + 12 / d) * PSI)


@pytest.mark.parametrize("d", [1, 4, 64])
def test_zero_paper_model_states(d: int) -> None:
    """ZeRO §5 with K = 12: 16Ψ, 4Ψ + 12Ψ/d, 2Ψ + 14Ψ/d, 16Ψ/d."""
    expected = {0: 16, 1: 4 + 12 / d, 2: 2 + 14 / d, 3: 16 / d}
    for stage, per_param in expected.items():
        assert sum(model_state_bytes(PSI, d, stage, 2, 2, 12)) == pytest.approx(per_param * PSI)


def gpt_layer(h: int = 4096, a: int = 32) -> TransformerLayer:
    return TransformerLayer(hidden_size=h, num_heads=a, num_kv_heads=a, head_dim=h // a, ffn_hidden_size=4 * h, dropout=True)


@pytest.mark.parametrize("t, sp", [(1, False), (8, False), (8, True)])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_korthikanti_table_2(t: int, sp: bool, recompute: str) -> None:
    """Table 2: sbh(10 + 24/t + 5as/(ht)); SP divides the 10 by t; selective drops 5as/h; full keeps
    2sbh (÷t with SP). The block's own bookkeeping must reproduce it for a GPT layer (eager
    attention, dropout, f = 4h)."""
    s, b, h, a = 2048, 2, 4096, 32
    table = korthikanti_layer_bytes(s, b, h, a, t, sp, recompute)
    repl = 10 / (t if sp else 1)
    expected = {"none": s * b * h * (repl + 24 / t + 5 * a * s / (h * t)), "selective": s * b * h * (repl + 24 / t),
                "full": 2 * s * b * h / (t if sp else 1)}[recompute]
    assert table == pytest.approx(expected)
    cfg = LocalConfig(micro_batch=b, seq_len=s, tp=t, cp=1, ep=1, sp=sp, recompute=recompute, flash=False, zero3_group=1)
    stored, _ = transformer_activation_bytes(gpt_layer(h, a), cfg)
    assert stored == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("p, m, v", [(4, 8, 1), (8, 64, 1), (8, 64, 2), (16, 32, 4)])
def test_pipeline_bubble_fractions(p: int, m: int, v: int) -> None:
    """Narayanan et al. 2021 §2.2: (p − 1)/m for GPipe and 1F1B, (p − 1)/(v·m) interleaved; ZB-H1 a third."""
    assert bubble_fraction(p, m, 1, "gpipe") == pytest.approx((p - 1) / m)
    assert bubble_fraction(p, m, 1, "1f1b") == pytest.approx((p - 1) / m)
    assert bubble_fraction(p, m, v, "interleaved-1f1b") == pytest.approx((p - 1) / (v * m))
    assert bubble_fraction(p, m, 1, "zb-h1") == pytest.approx((p - 1) / (3 * m))


def test_model_flops_follow_narayanan_with_causal_attention() -> None:
    """72·B·s·l·h²(1 + s/6h + V/12lh) counts full s² attention; meshplan counts causal half of it:
    the attention term s/6h becomes s/12h. Biases and norms add no matmul FLOPs."""
    B, s, l, h, V = 8, 2048, 4, 1024, 51200
    layers = (EmbeddingLayer(vocab_size=V, hidden_size=h),) + (gpt_layer(h, 16),) * l + (NormLayer(hidden_size=h), HeadLayer(vocab_size=V, hidden_size=h, tied=True))
    expected = 72 * B * s * l * h * h * (1 + s / (12 * h) + V / (12 * l * h))
    assert model_flops_per_step(layers, B, s) == pytest.approx(expected, rel=1e-12)
