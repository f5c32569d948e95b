"""The exhaustive reference solver on its own: its space, its target rules, its size limit."""

from __future__ import annotations

import math

import pytest

from costmodel.specs import ClusterSpec, EfficiencySpec, EmbeddingLayer, GPUSpec, HeadLayer, ModelSpec, NormLayer, TransformerLayer
from costmodel.step import estimate_step
from costmodel.table import build_cost_table, default_stage_layers
from planner.estimation.config_checks import parallel_problems
from search.exhaustive import MAX_CONFIGS, configurations, exhaustive_search, space_size
from search.types import SearchRequest


def model(blocks: int = 3, heads: int = 4, experts: int = 0) -> ModelSpec:
    block = TransformerLayer(hidden_size=128, num_heads=heads, num_kv_heads=heads, head_dim=128 // heads, ffn_hidden_size=512,
                             num_experts=experts, moe_top_k=2 if experts else 0)
    return ModelSpec(name="m", layers=(EmbeddingLayer(vocab_size=1000, hidden_size=128),) + (block,) * blocks
                     + (NormLayer(hidden_size=128), HeadLayer(vocab_size=1000, hidden_size=128)))


def cluster(hbm_gib: float = 1.0) -> ClusterSpec:
    gpu = GPUSpec(name="g", peak_bf16_tflops=100, hbm_gib=hbm_gib, hbm_bandwidth_gbps=1000)
    eff = EfficiencySpec(gemm_max=0.7, gemm_half_gflop=0.5, attention=0.5, memory=0.7, intra_node=0.8, network=0.8)
    return ClusterSpec(name="c", gpu=gpu, gpus_per_node=4, intra_node_bandwidth_gbps=150, network_bandwidth_gbps=12.5,
                       intra_node_latency_us=2, network_latency_us=5, efficiency=eff, runtime_overhead_gib=0.0)


def test_every_configuration_can_run_and_the_count_is_exact() -> None:
    spec, req = model(), SearchRequest(gpus=4, global_batch=4, seq_len=128, max_vpp=2)
    configs = list(configurations(spec, cluster(), req))
    assert len(configs) == space_size(spec, cluster(), req) == len(set(configs))
    assert all(parallel_problems(spec, c, 4) == [] for c in configs)
    assert {c.schedule for c in configs} == {"1f1b", "gpipe", "zb-h1", "interleaved-1f1b"} or all(c.pp * 2 > 3 for c in configs if c.vpp > 1)
    # pp 2 takes every split of the 6 layers into 2 chunks and every mode of each of the 3 blocks
    pp2 = [c for c in configs if (c.tp, c.cp, c.pp, c.zero, c.micro_batch, c.schedule) == (1, 1, 2, 0, 1, "1f1b")]
    assert len(pp2) == math.comb(5, 1) * 3**3
    assert all(c.layer_recompute[0] == c.layer_recompute[-1] == c.layer_recompute[-2] == "none" for c in configs)


@pytest.mark.parametrize("target", ["megatron", "torchtitan", "deepspeed"])
def test_targets_narrow_the_space(target: str) -> None:
    spec, native = model(blocks=4), SearchRequest(gpus=4, global_batch=8, seq_len=128, max_vpp=2)
    req = SearchRequest(gpus=4, global_batch=8, seq_len=128, max_vpp=2, target=target)  # type: ignore[arg-type]
    configs = list(configurations(spec, cluster(), req))
    assert 0 < len(configs) < space_size(spec, cluster(), native)
    modes = [{m for m, x in zip(c.layer_recompute, spec.layers) if x.kind == "transformer"} for c in configs]
    if target == "megatron":
        assert {c.schedule for c in configs} == {"1f1b", "interleaved-1f1b"}
        mixed = [c for c, m in zip(configs, modes) if len(m) > 1]
        assert mixed and all(set(c.layer_recompute) == {"none", "full"} for c in mixed)  # block method only
    else:
        assert all(len(m) == 1 for m in modes)
    if target == "torchtitan":
        assert {c.zero for c in configs} == {0, 3} and "zb-h1" not in {c.schedule for c in configs}
    if target == "deepspeed":
        assert all(c.cp == 1 and c.schedule == "1f1b" and (c.pp == 1 or c.zero <= 1) for c in configs)
        assert all(c.stage_layers == default_stage_layers(spec, c.pp) for c in configs)


def test_compiled_torchtitan_plans_may_overlap_tp_communication() -> None:
    """torchtitan overlaps TP communication only as async TP, which needs torch.compile: a compiled
    request tries it with SP, an eager one never, and every configuration carries the request's
    ``compile``."""
    spec = model(blocks=2)
    eager = list(configurations(spec, cluster(), SearchRequest(gpus=4, global_batch=4, seq_len=128, max_vpp=2, target="torchtitan")))
    compiled = list(configurations(spec, cluster(), SearchRequest(gpus=4, global_batch=4, seq_len=128, max_vpp=2, target="torchtitan",
                                                                  compile=True)))
    assert not any(c.tp_comm_overlap for c in eager) and all(c.compile is None for c in eager)
    assert all(c.compile is True for c in compiled)
    assert {c.tp_comm_overlap for c in compiled if c.sp} == {False, True}
    assert not any(c.tp_comm_overlap for c in compiled if not c.sp)


def test_nonuniform_false_keeps_the_default_split_and_one_mode() -> None:
    spec = model()
    req = SearchRequest(gpus=2, global_batch=2, seq_len=128, nonuniform=False)
    configs = list(configurations(spec, cluster(), req))
    assert all(c.stage_layers == default_stage_layers(spec, c.pp * c.vpp) for c in configs)
    assert all(len({c.layer_recompute[i] for i in (1, 2, 3)}) == 1 for c in configs)


def test_experts_take_expert_degrees() -> None:
    spec = model(blocks=2, experts=4)
    configs = list(configurations(spec, cluster(), SearchRequest(gpus=4, global_batch=4, seq_len=128, nonuniform=False, target="megatron")))
    assert {c.ep for c in configs} == {1, 2, 4}
    native = configurations(spec, cluster(), SearchRequest(gpus=4, global_batch=4, seq_len=128, nonuniform=False))
    assert {c.ep for c in native} == {1, 2, 4}  # the native runtime shards experts over ep
    assert all((c.dp * c.cp) % c.ep == 0 for c in configs)


def test_optimum_is_the_fastest_fitting_configuration() -> None:
    spec, hw = model(blocks=2), cluster(0.010)  # 176 of the 948 configurations fit
    req = SearchRequest(gpus=2, global_batch=2, seq_len=256)
    result = exhaustive_search(spec, hw, req)
    table = build_cost_table(spec, hw)
    estimates = [estimate_step(table, c) for c in configurations(spec, hw, req)]
    fitting = [e.step_time_s for e in estimates if e.fits]
    assert fitting and len(fitting) < len(estimates)  # memory binds
    assert result.best is not None and result.best.step_time_s == min(fitting)
    assert result.stats.evaluated == len(estimates) and result.stats.status == "optimal"
    assert all(a.step_time_s >= result.best.step_time_s for a in result.alternatives)


def test_nothing_fits_gives_the_nearest_miss() -> None:
    result = exhaustive_search(model(blocks=2), cluster(0.001), SearchRequest(gpus=1, global_batch=1, seq_len=128))
    assert result.best is None and result.nearest_miss is not None
    assert result.nearest_miss.estimate.over_by_gib > 0


def test_large_spaces_are_refused() -> None:
    big = SearchRequest(gpus=8, global_batch=64, seq_len=1024)
    with pytest.raises(ValueError, match="more than 1,000"):
        exhaustive_search(model(blocks=4), cluster(), big, limit=1000)
    assert space_size(model(blocks=4), cluster(), big, stop_at=MAX_CONFIGS) > 1000
