"""FP8 in the search space (SearchRequest.precisions): the search tries FP8 projections where the GPU
has FP8 tensor cores, and its compute floor stays below every plan (FP8 GEMMs beat the BF16 peak)."""

from __future__ import annotations

from costmodel.specs import EmbeddingLayer, HeadLayer, ModelSpec, NormLayer, TransformerLayer
from profiles import load_cluster
from search.bounds import compute_floor_s
from search.core import search_plan
from search.types import SearchRequest


def small_llama() -> ModelSpec:
    block = TransformerLayer(hidden_size=2048, num_heads=16, num_kv_heads=8, head_dim=128, ffn_hidden_size=5632, ffn_act="swiglu", norm="rmsnorm")
    layers = (EmbeddingLayer(vocab_size=32000, hidden_size=2048),) + (block,) * 8 + (NormLayer(hidden_size=2048, norm="rmsnorm"), HeadLayer(vocab_size=32000, hidden_size=2048))
    return ModelSpec(name="small-llama", layers=layers)


def test_fp8_is_searched_where_the_gpu_has_it() -> None:
    model = small_llama()
    both = ("bf16", "fp8")
    h100 = load_cluster("dgx-h100")
    bf16 = search_plan(model, h100, SearchRequest(gpus=8, global_batch=32, seq_len=4096))
    fp8 = search_plan(model, h100, SearchRequest(gpus=8, global_batch=32, seq_len=4096, precisions=both))
    assert bf16.best.config.precision == "bf16" and fp8.best.config.precision == "fp8"
    assert fp8.best.step_time_s < bf16.best.step_time_s
    assert compute_floor_s(model, h100, SearchRequest(gpus=8, global_batch=32, seq_len=4096, precisions=both)) <= fp8.best.step_time_s
    a100 = search_plan(model, load_cluster("dgx-a100"), SearchRequest(gpus=8, global_batch=32, seq_len=4096, precisions=both))
    assert a100.best.config.precision == "bf16"
