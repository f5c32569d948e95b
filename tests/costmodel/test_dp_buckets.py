"""Bucketed data-parallel overlap (costmodel.step): bucket sizes as each engine sets them, and only
the last gradient bucket (and the first parameter bucket) exposed when the backward hides the rest."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from costmodel import step as step_mod
from costmodel.ranks import rank_costs
from costmodel.specs import EmbeddingLayer, HeadLayer, ModelSpec, ParallelConfig, TransformerLayer
from costmodel.table import build_cost_table
from profiles import load_cluster

H100 = load_cluster("dgx-h100")


def test_bucket_sizes_follow_each_engine() -> None:
    """Megatron: max(40M, 1M x dp) (distributed_data_parallel.py, read from the installed
    megatron-core); DeepSpeed reduce_bucket_size 5e8; torch DDP 25 MiB."""
    spec = importlib.util.find_spec("megatron.core")
    assert spec is not None and spec.submodule_search_locations
    src = (Path(spec.submodule_search_locations[0]) / "distributed" / "distributed_data_parallel.py").read_text(encoding="utf-8")
    assert "max(40000000, 1000000 * dp_group.size())" in src
    cfg = ParallelConfig(dp=8, global_batch=8, seq_len=1024, engine="megatron")
    assert step_mod.grad_bucket_params(cfg) == 40_000_000
    assert step_mod.grad_bucket_params(cfg.model_copy(update={"dp": 48})) == 48_000_000
    assert step_mod.grad_bucket_params(cfg.model_copy(update={"engine": "deepspeed"})) == 5e8
    assert step_mod.grad_bucket_params(cfg.model_copy(update={"engine": "torchtitan"})) == 25 * 2**20 / 4


def _dp(cfg: ParallelConfig) -> tuple[float, float, float]:
    block = TransformerLayer(hidden_size=4096, num_heads=32, num_kv_heads=32, head_dim=128, ffn_hidden_size=16384)
    model = ModelSpec(name="gpt-7b", layers=(EmbeddingLayer(vocab_size=50304, hidden_size=4096),) + (block,) * 8 + (HeadLayer(vocab_size=50304, hidden_size=4096),))
    table = build_cost_table(model, H100)
    r = rank_costs(table, cfg, lambda rc: step_mod.local_config(table, cfg, rc))
    link, exposed = step_mod._data_parallel_comm(table, cfg, r, cfg.num_microbatches)
    return link, exposed, r.types[0].params


def test_only_the_last_bucket_is_exposed_behind_a_long_backward() -> None:
    cfg = ParallelConfig(dp=16, zero=0, micro_batch=8, global_batch=128, seq_len=4096, engine="megatron")
    link, exposed, params = _dp(cfg)
    buckets = math.ceil(params / 40_000_000)
    assert buckets > 10
    (all_reduce, _), _ = step_mod._dp_coefficients(build_cost_table(ModelSpec(name="x", layers=(EmbeddingLayer(vocab_size=8, hidden_size=8),)), H100), cfg)
    assert exposed == pytest.approx(all_reduce(params * 4 / buckets))  # one bucket's fp32 all-reduce
    assert exposed < link / buckets * 1.5
    off_link, off_exposed, _ = _dp(cfg.model_copy(update={"overlap_grad_reduce": False}))
    assert off_exposed == pytest.approx(off_link) and off_link == pytest.approx(link)


def test_param_gather_exposes_its_first_bucket() -> None:
    cfg = ParallelConfig(dp=16, zero=1, micro_batch=8, global_batch=128, seq_len=4096, engine="megatron")
    _, exposed, _ = _dp(cfg)
    _, no_gather_overlap, _ = _dp(cfg.model_copy(update={"overlap_param_gather": False}))
    assert 0 < exposed < no_gather_overlap
