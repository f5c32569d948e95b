"""The gathered K/V of context parallelism (``costmodel.cp_memory``): nothing at cp 1, the other ranks'
repeated K and V at cp > 1 (grouped, as SDPA gets them, in transformers' own blocks), counted by the native engine only (its runtime gathers them,
``planner.runtime.context_parallel``)."""

from __future__ import annotations

from dataclasses import replace

from costmodel.activations import block_activation_bytes
from costmodel.cp_memory import cp_gathered_kv_bytes
from costmodel.engines import engine_terms
from costmodel.local import LocalConfig
from costmodel.specs import ParallelConfig
from planner.intake.models.presets import build_preset

LAYER = build_preset("llama3.1-8b").layers[1]


def _local(cp: int, engine: str) -> LocalConfig:
    cfg = ParallelConfig(tp=2, cp=cp, micro_batch=1, global_batch=8, seq_len=8192, engine=engine)
    return LocalConfig(micro_batch=1, seq_len=8192, tp=2, cp=cp, ep=1, sp=False, recompute="none", flash=True,
                       zero3_group=1, terms=engine_terms(cfg))


def test_nothing_without_context_parallelism() -> None:
    assert cp_gathered_kv_bytes(LAYER, _local(1, "native")) == 0.0


def test_the_other_ranks_k_and_v_repeated_to_every_query_head() -> None:
    cfg = _local(4, "native")
    local_tokens = 8192 / 4
    assert cp_gathered_kv_bytes(LAYER, cfg) == local_tokens * 2 * 2 * (32 * 128 / 2) * 3


def test_transformers_blocks_gather_the_grouped_k_and_v() -> None:
    """transformers' Llama hands SDPA its 8 KV heads unrepeated (``enable_gqa``): a quarter of the
    32 query heads' width gathered."""
    cfg = _local(4, "native")
    hf = LAYER.model_copy(update={"transformers_block": True})
    local_tokens = 8192 / 4
    assert cp_gathered_kv_bytes(hf, cfg) == local_tokens * 2 * (2 * 8 * 128 / 2) * 3
    assert cp_gathered_kv_bytes(hf, cfg) == cp_gathered_kv_bytes(LAYER, cfg) / 4


def test_the_native_engine_stores_it_beside_the_block() -> None:
    cfg = _local(4, "native")
    without = replace(cfg, terms=replace(cfg.terms, cp_all_gather=False))
    added = block_activation_bytes(LAYER, cfg, [])[0] - block_activation_bytes(LAYER, without, [])[0]
    assert added == cp_gathered_kv_bytes(LAYER, cfg) > 0


def test_other_engines_do_not() -> None:
    cfg = _local(4, "torchtitan")
    without = replace(cfg, terms=replace(cfg.terms, cp_all_gather=False))
    assert block_activation_bytes(LAYER, cfg, [])[0] == block_activation_bytes(LAYER, without, [])[0]
