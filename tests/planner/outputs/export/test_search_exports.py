"""The search never proposes what the chosen target's exporter refuses (issue 13): on generated
small decoders (dense, or dense and MoE blocks alternating; a large vocabulary makes the output head
the heaviest layer), GPU counts, batches, memory sizes and pipeline constraints, every plan that
``planner.plan`` finds for megatron, torchtitan or deepspeed exports to that target, and a model the
target cannot build at all is refused before any search.

BUDGET: about 10 s on 2 cores (tiny models, at most 16 GPUs).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import planner
from costmodel.specs import (
    ClusterSpec, EfficiencySpec, EmbeddingLayer, GenericLayer, GPUSpec, HeadLayer, ModelSpec, NormLayer, TransformerLayer,
)
from planner.errors import InputError, NoFeasiblePlanError
from planner.outputs.export import export, render


def decoder(blocks: int, hidden: int, vocab: int, moe: bool) -> ModelSpec:
    """Embedding, ``blocks`` blocks (every other one mixture-of-experts when ``moe``), norm, head."""
    dense = TransformerLayer(hidden_size=hidden, num_heads=4, num_kv_heads=2, head_dim=hidden // 4, ffn_hidden_size=3 * hidden,
                             ffn_act="swiglu", norm="rmsnorm")
    sparse = dense.model_copy(update={"num_experts": 4, "moe_top_k": 2, "ffn_hidden_size": hidden})
    body = tuple(sparse if moe and i % 2 else dense for i in range(blocks))
    return ModelSpec(name="gen", layers=(EmbeddingLayer(vocab_size=vocab, hidden_size=hidden), *body,
                                          NormLayer(hidden_size=hidden, norm="rmsnorm"), HeadLayer(vocab_size=vocab, hidden_size=hidden)))


def cluster(hbm_gib: float) -> ClusterSpec:
    """Eight GPUs per node with little memory, so that memory binds in some cases."""
    gpu = GPUSpec(name="small-gpu", peak_bf16_tflops=100, hbm_gib=hbm_gib, hbm_bandwidth_gbps=1000)
    eff = EfficiencySpec(gemm_max=0.7, gemm_half_gflop=0.5, attention=0.5, memory=0.7, intra_node=0.8, network=0.8)
    return ClusterSpec(name="small", gpu=gpu, gpus_per_node=8, intra_node_bandwidth_gbps=150, network_bandwidth_gbps=12.5,
                       intra_node_latency_us=2, network_latency_us=5, efficiency=eff, runtime_overhead_gib=0.02)


JOBS = st.fixed_dictionaries({
    "model": st.builds(decoder, st.integers(2, 7), st.sampled_from([64, 128]), st.sampled_from([512, 65536]), st.booleans()),
    "cluster": st.builds(cluster, st.sampled_from([0.05, 0.2, 1.0, 8.0])),
    "gpus": st.sampled_from([2, 3, 4, 6, 8, 16]),
    "global_batch": st.sampled_from([6, 8, 16]),
    "seq_len": st.sampled_from([64, 256]),
    "target": st.sampled_from(["megatron", "torchtitan", "deepspeed"]),
    "pp": st.sampled_from([None, None, 2, 3]),
    "zero": st.sampled_from([None, None, 0, 3]),
    "ep": st.sampled_from([None, None, 2]),
})
HEAVY_HEAD_SPLIT = dict(model=decoder(2, 64, 65536, False), cluster=cluster(8.0), gpus=2, global_batch=16, seq_len=256, target="megatron",
                        pp=2, zero=None, ep=None)
"""Megatron: the head outweighs the blocks, so the fastest two-stage split is [embedding, blocks, norm | head],
which Megatron-LM's layout cannot express (its loss stage holds the norm and the head)."""
UNEVEN_DEEPSPEED = dict(model=decoder(4, 64, 512, False), cluster=cluster(8.0), gpus=3, global_batch=6, seq_len=64, target="deepspeed",
                        pp=3, zero=None, ep=None)
"""DeepSpeed: four blocks over three stages is no equal block split ([3, 1, 3] layers by default);
PipelineModule's uniform split is [3, 2, 2]."""
MOE_DEEPSPEED = dict(model=decoder(2, 64, 512, True), cluster=cluster(8.0), gpus=8, global_batch=8, seq_len=64, target="deepspeed",
                     pp=None, zero=3, ep=None)
"""DeepSpeed refuses native MoE layers under ZeRO-3: refused as a constraint, never planned."""
MOE_TORCHTITAN = dict(model=decoder(2, 64, 512, True), cluster=cluster(8.0), gpus=8, global_batch=8, seq_len=64, target="torchtitan",
                      pp=None, zero=0, ep=2)
"""torchtitan: experts over replicated data parallelism (ZeRO-0) are carved out of cp only."""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(JOBS)
@example(HEAVY_HEAD_SPLIT)
@example(UNEVEN_DEEPSPEED)
@example(MOE_DEEPSPEED)
@example(MOE_TORCHTITAN)
def test_every_plan_found_exports_to_its_target(job: dict) -> None:
    target = job["target"]
    try:
        plan = planner.plan(**job, top_k=0)
    except (NoFeasiblePlanError, InputError):  # nothing fits, or constraints the target refuses: said, not proposed
        return
    result = export(plan, target)  # raises UnsupportedPlanError (an InputError) on any refusal
    assert result is not None and render(plan, target)


@pytest.mark.parametrize("target", ["megatron", "torchtitan"])
def test_a_model_the_target_cannot_build_is_refused_before_searching(target: str) -> None:
    model = decoder(2, 64, 512, False)
    odd = model.model_copy(update={"layers": (*model.layers[:2], GenericLayer(name="adapter", params=64, fwd_flops_per_token=128.0), *model.layers[2:])})
    with pytest.raises(InputError, match=f"--target {target}: model.layers\\[2\\]: .*plan it with --target native"):
        planner.plan(model=odd, cluster=cluster(8.0), gpus=2, global_batch=4, seq_len=64, target=target)
