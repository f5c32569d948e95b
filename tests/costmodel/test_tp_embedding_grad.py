"""Under TP the native runtime's vocabulary-parallel embedding makes a full-vocabulary bf16 gradient;
reduced at once, FSDP2 copies only the rank's V/t rows into its fp32 reduce-scatter input, so no
full-table fp32 copy is priced (``costmodel.rank_memory._tp_embedding_grad_bytes``)."""

from __future__ import annotations

import json
from pathlib import Path

from costmodel.engines import engine_terms
from costmodel.rank_memory import _tp_embedding_grad_bytes, rank_allocated_bytes
from costmodel.ranks import rank_costs
from costmodel.specs import ParallelConfig
from costmodel.step import local_config
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

GPT2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 32, "n_head": 4, "n_layer": 4, "vocab_size": 128,
        "n_positions": 64, "n_ctx": 64, "tie_word_embeddings": True, "bos_token_id": 0, "eos_token_id": 0, "resid_pdrop": 0.0,
        "embd_pdrop": 0.0, "attn_pdrop": 0.0}
"""The differential sweep's GPT-2 (``tests/planner/runtime/differential_draw.py``)."""
TRACKER_KIB = 56.01
"""torch's tracker (``meshplan check-memory``) on its embedding-only first stage, dp 2, tp 2, pp 2, SP,
ZeRO 1, 1F1B, one micro-batch of 4 at sequence 16, stage layers [1, 6]: case d0219 at draw seed 1."""


def _table(tmp_path: Path):  # type: ignore[no-untyped-def]
    config = tmp_path / "gpt2.json"
    config.write_text(json.dumps(GPT2))
    return build_cost_table(resolve_model_arg(str(config)), resolve_cluster_arg("dgx-a100"))


def _cfg(micro_batch: int) -> ParallelConfig:
    return ParallelConfig(dp=2, tp=2, pp=2, sp=True, zero=1, schedule="1f1b", micro_batch=micro_batch, global_batch=8,
                          seq_len=16, stage_layers=[1, 6], engine="native")


def test_reduced_at_once_only_the_bf16_table_is_transient(tmp_path: Path) -> None:
    table, cfg = _table(tmp_path), _cfg(4)
    assert cfg.num_microbatches == 1
    assert _tp_embedding_grad_bytes(table, cfg, engine_terms(cfg), 0) == (0.0, 2.0 * 128 * 32)
    assert _tp_embedding_grad_bytes(table, cfg, engine_terms(cfg), 1) == (0.0, 0.0)


def test_accumulated_the_fp32_accumulator_is_the_whole_table(tmp_path: Path) -> None:
    table, cfg = _table(tmp_path), _cfg(1)
    assert cfg.num_microbatches == 4 and engine_terms(cfg).pp_unsharded_grads
    assert _tp_embedding_grad_bytes(table, cfg, engine_terms(cfg), 0) == (4.0 * 128 * 32 / 2, 2.0 * 128 * 32)


def test_the_embedding_only_stage_is_priced_within_the_band_of_the_tracker(tmp_path: Path) -> None:
    table, cfg = _table(tmp_path), _cfg(4)
    ranks = rank_costs(table, cfg, lambda recompute: local_config(table, cfg, recompute))
    kib = sum(rank_allocated_bytes(table, cfg, ranks.types[ranks.rank_type[0]], 0).values()) / 1024
    assert -0.03 <= kib / TRACKER_KIB - 1 <= 0.10
