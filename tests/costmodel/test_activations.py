"""What of a recomputed block's stored activations its transient holds again
(``costmodel.activations.recomputed_stored_bytes``): the selective policy's saved tensors always,
the block's input only where a LayerNorm saves it as it comes; the native runtime only."""

from __future__ import annotations

import pytest

from costmodel.activations import block_activation_bytes, recomputed_stored_bytes
from costmodel.engines import engine_terms
from costmodel.local import ACT_BYTES, LocalConfig
from costmodel.specs import ParallelConfig, TransformerLayer

H, TOKENS = 32, 128


def _layer(norm: str) -> TransformerLayer:
    return TransformerLayer(hidden_size=H, num_heads=4, num_kv_heads=4, head_dim=H // 4, ffn_hidden_size=64, ffn_act="relu", norm=norm)


def _local(recompute: str, engine: str = "native") -> LocalConfig:
    terms = engine_terms(ParallelConfig(micro_batch=1, global_batch=1, seq_len=TOKENS, engine=engine, recompute=recompute))
    return LocalConfig(micro_batch=1, seq_len=TOKENS, tp=1, cp=1, ep=1, sp=False, recompute=recompute, flash=True, zero3_group=1, terms=terms)


def _again(norm: str, recompute: str, engine: str = "native") -> tuple[float, float]:
    layer, cfg = _layer(norm), _local(recompute, engine)
    stored, _ = block_activation_bytes(layer, cfg, [3.0 * H, float(H), 64.0, float(H)])
    return stored, recomputed_stored_bytes(layer, cfg, stored)


@pytest.mark.parametrize("recompute", ["selective", "full"])
def test_a_layernorm_block_holds_all_it_stored_again(recompute: str) -> None:
    stored, again = _again("layernorm", recompute)
    assert again == stored > 0


def test_an_rmsnorm_block_keeps_its_input_apart() -> None:
    """Eager RMSNorm saves an fp32 copy of the input: the checkpoint's bf16 input is not the transient's."""
    own_input = TOKENS * ACT_BYTES * H
    stored, again = _again("rmsnorm", "full")
    assert (stored, again) == (own_input, 0.0)
    stored, again = _again("rmsnorm", "selective")
    assert again == stored - own_input > 0


def test_nothing_without_recompute_or_on_other_engines() -> None:
    assert _again("layernorm", "none")[1] == 0.0
    assert _again("layernorm", "selective", "torchtitan")[1] == 0.0
