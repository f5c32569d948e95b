"""The eager RMSNorm backward of a transformers block (``costmodel.activations.eager_rmsnorm_backward_bytes``):
five fp32 b·s·h temporaries at its MLP norm's backward, less the MLP activations freed by then, the
block's transient where larger than its MLP backward's; checked against torch's tracker on the
differential sweep's Llama."""

from __future__ import annotations

import json
from pathlib import Path

from costmodel.activations import eager_mlp_backward_bytes, eager_rmsnorm_backward_bytes
from costmodel.engines import engine_terms
from costmodel.local import LocalConfig
from costmodel.rank_memory import rank_allocated_bytes
from costmodel.ranks import rank_costs
from costmodel.specs import ParallelConfig, TransformerLayer
from costmodel.step import local_config
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
         "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": 128,
         "max_position_embeddings": 64, "tie_word_embeddings": False}
"""The differential sweep's Llama (``tests/planner/runtime/differential_draw.py``)."""
D0140_TRACKER_KIB = 431.42
"""torch's tracker, the sweep's Llama at tp 2, pp 2 (zb-h1, one micro-batch of 8, sequence 16, no
recompute, ZeRO 0; case d0140), its first stage: the peak at ``pow``'s backward ``mul`` inside the
last block's MLP norm backward (-4.8 % priced without the norm's temporaries and the MLP's bf16
weight gradients, ``costmodel.rank_units._layer_unit_bytes``; -2.7 % without the temporaries)."""


def _block(hf: bool = True) -> TransformerLayer:
    return TransformerLayer(hidden_size=32, num_heads=4, num_kv_heads=2, head_dim=8, ffn_hidden_size=64, ffn_act="swiglu",
                            norm="rmsnorm", transformers_block=hf)


def _local(tp: int) -> LocalConfig:
    terms = engine_terms(ParallelConfig(tp=tp, micro_batch=8, global_batch=8, seq_len=16, engine="native", recompute="none"))
    return LocalConfig(micro_batch=8, seq_len=16, tp=tp, cp=1, ep=1, sp=False, recompute="none", flash=True, zero3_group=1, terms=terms)


def test_the_norm_outweighs_the_mlp_backward_under_tp() -> None:
    """128 tokens, h 32, f 64 over 2: 5 x 16 KiB fp32 less 8 + 8 KiB (norm output, normalised
    tensor) and 32 KiB of SwiGLU activations is 32 KiB, twice the MLP backward's 16; at tp 1 the
    MLP's activations freed outweigh the temporaries."""
    assert eager_rmsnorm_backward_bytes(_block(), _local(2)) == 32 * 1024
    assert eager_mlp_backward_bytes(_block(), _local(2)) == 16 * 1024
    assert eager_rmsnorm_backward_bytes(_block(), _local(1)) == 0.0
    assert eager_rmsnorm_backward_bytes(_block(hf=False), _local(2)) == 0.0  # torch's RMSNorm: not measured


def test_d0140_is_priced_within_the_band_of_the_tracker(tmp_path: Path) -> None:
    path = tmp_path / "llama.json"
    path.write_text(json.dumps(LLAMA))
    table = build_cost_table(resolve_model_arg(str(path)), resolve_cluster_arg("dgx-a100"))
    cfg = ParallelConfig(tp=2, pp=2, zero=0, micro_batch=8, global_batch=8, seq_len=16, schedule="zb-h1", sp=False,
                         recompute="none", stage_layers=[3, 4], engine="native")
    ranks = rank_costs(table, cfg, lambda r: local_config(table, cfg, r))
    kib = sum(rank_allocated_bytes(table, cfg, ranks.types[0], 0).values()) / 1024
    assert 0.0 <= kib / D0140_TRACKER_KIB - 1 <= 0.10  # +1.0 %; -2.7 % without the norm's temporaries
