"""Small models and mixed clusters shared by the heterogeneous tests."""

from __future__ import annotations

import functools

from costmodel.hetero import ClusterGroup, HeteroCluster
from costmodel.specs import (
    ClusterSpec,
    EfficiencySpec,
    EmbeddingLayer,
    GPUSpec,
    HeadLayer,
    ModelSpec,
    NormLayer,
    TransformerLayer,
)
from profiles.degrade import degrade
from search.hetero.exhaustive import ExhaustiveBest, exhaustive_hetero
from search.hetero.types import HeteroRequest


def tiny_model(blocks: int = 4, hidden: int = 1024, heads: int = 8, vocab: int = 8000) -> ModelSpec:
    """Embedding, ``blocks`` identical blocks, final norm, head."""
    block = TransformerLayer(hidden_size=hidden, num_heads=heads, num_kv_heads=heads, head_dim=hidden // heads,
                             ffn_hidden_size=4 * hidden)
    body = (EmbeddingLayer(vocab_size=vocab, hidden_size=hidden),) + (block,) * blocks
    return ModelSpec(name="tiny", layers=body + (NormLayer(hidden_size=hidden), HeadLayer(vocab_size=vocab, hidden_size=hidden)))


def node(name: str, tflops: float, hbm_gib: float, network_gbps: float) -> ClusterSpec:
    """A four-GPU node type."""
    gpu = GPUSpec(name=name, peak_bf16_tflops=tflops, hbm_gib=hbm_gib, hbm_bandwidth_gbps=1000)
    eff = EfficiencySpec(gemm_max=0.7, gemm_half_gflop=0.5, attention=0.5, memory=0.7, intra_node=0.8, network=0.8)
    return ClusterSpec(name=name, gpu=gpu, gpus_per_node=4, intra_node_bandwidth_gbps=150, network_bandwidth_gbps=network_gbps,
                       intra_node_latency_us=2, network_latency_us=5, efficiency=eff, runtime_overhead_gib=0.02)


def mixed(fast_gpus: int, slow_gpus: int, slow_hbm_gib: float = 2.0) -> HeteroCluster:
    """A fast, large-memory group then a slower, smaller-memory one."""
    return HeteroCluster(name="mixed", groups=(ClusterGroup(cluster=node("fast", 300, 4.0, 25), gpus=fast_gpus),
                                               ClusterGroup(cluster=node("slow", 100, slow_hbm_gib, 12.5), gpus=slow_gpus)))


@functools.cache
def exhaustive_optimum(fast: int, slow: int, hbm: float, slow_flag: str | None, down_flag: str | None,
                       request_items: tuple) -> ExhaustiveBest | None:
    """``search.hetero.exhaustive.exhaustive_hetero`` of one case of ``test_exhaustive.CASES``
    (``request_items``: the request's arguments as sorted items), computed once per pytest process:
    ``test_exhaustive`` and ``test_gap`` both compare against it and only read it."""
    return exhaustive_hetero(tiny_model(), degrade(mixed(fast, slow, hbm), slow_flag, down_flag), HeteroRequest(**dict(request_items)))
