"""Constraints in the search and in the exhaustive reference solver: both explore exactly the
constrained space, agree on its optimum, and name the nearest configuration when it is empty."""

from __future__ import annotations

from dataclasses import replace

import pytest

from costmodel.specs import ClusterSpec, EfficiencySpec, EmbeddingLayer, GPUSpec, HeadLayer, ModelSpec, NormLayer, TransformerLayer
from search.constraints import closest_unconstrained, describe, recompute_modes
from search.core import search_plan
from search.exhaustive import configurations, exhaustive_search
from search.space import meshes, options
from search.types import Constraints, SearchRequest

REL = 1e-9
BASE = SearchRequest(gpus=4, global_batch=4, seq_len=128, max_vpp=2, top_k=2)
DIMS = ("tp", "pp", "cp", "dp", "ep", "vpp", "zero", "micro_batch", "sp", "schedule")


def model(blocks: int, heads: int = 4) -> ModelSpec:
    block = TransformerLayer(hidden_size=128, num_heads=heads, num_kv_heads=heads, head_dim=128 // heads, ffn_hidden_size=512)
    return ModelSpec(name="m", layers=(EmbeddingLayer(vocab_size=1000, hidden_size=128),) + (block,) * blocks
                     + (NormLayer(hidden_size=128), HeadLayer(vocab_size=1000, hidden_size=128)))


def cluster(hbm_gib: float = 1.0) -> ClusterSpec:
    """Two GPUs per node, little memory: memory binds in some configurations."""
    gpu = GPUSpec(name="g", peak_bf16_tflops=100, hbm_gib=hbm_gib, hbm_bandwidth_gbps=1000)
    eff = EfficiencySpec(gemm_max=0.7, gemm_half_gflop=0.5, attention=0.5, memory=0.7, intra_node=0.8, network=0.8)
    return ClusterSpec(name="c", gpu=gpu, gpus_per_node=2, intra_node_bandwidth_gbps=150, network_bandwidth_gbps=12.5,
                       intra_node_latency_us=2, network_latency_us=5, efficiency=eff, runtime_overhead_gib=0.0)


def test_allows_and_cap() -> None:
    c = Constraints(tp=(2, 2), pp=(1, 4), cp=(4, None), sp=True, recompute="full")
    assert c.allows("tp", 2) and not c.allows("tp", 4) and c.allows("pp", 4) and not c.allows("pp", 8)
    assert c.allows("cp", 64) and not c.allows("cp", 2) and c.allows("dp", 3) and not c.allows("sp", False)
    assert c.cap("tp", 8) == 2 and c.cap("dp", 8) == 8 and c.cap("cp", 2) == float("inf") and c.cap("cp", 32) == 32
    assert bool(c) and not Constraints()
    assert recompute_modes(c) == ("full",) and recompute_modes(Constraints()) == ("none", "selective", "full")
    assert describe(c) == "tp 2, pp 1..4, cp 4.., sp, recompute full"


CASES = [  # (constraints, blocks): each constrained space holds at most about 4,000 configurations
    (Constraints(tp=(2, 2), zero=(1, 1)), 3),
    (Constraints(pp=(2, 4), zero=(0, 1), micro_batch=(1, 1)), 3),
    (Constraints(dp=(2, 2), micro_batch=(2, 2), sp=False), 3),
    (Constraints(recompute="none", schedule="gpipe"), 4),
    (Constraints(vpp=(2, 2), tp=(1, 1), recompute="full"), 4),
    (Constraints(recompute="selective", cp=(1, 1), zero=(3, 3)), 4),
]


@pytest.mark.parametrize(("constraints", "blocks"), CASES, ids=[describe(c) for c, _ in CASES])
def test_search_and_exhaustive_agree_within_the_constraints(constraints: Constraints, blocks: int) -> None:
    spec, hw = model(blocks), cluster(hbm_gib=0.03)
    req = replace(BASE, constraints=constraints)
    found, truth = search_plan(spec, hw, req), exhaustive_search(spec, hw, req)
    every = list(configurations(spec, hw, req))
    for cfg in every:  # the reference solver enumerates only what the constraints allow
        assert all(constraints.allows(k, getattr(cfg, k)) for k in DIMS)
        layers = [m for m, x in zip(cfg.layer_recompute, spec.layers) if x.kind == "transformer"]
        assert constraints.recompute is None or set(layers) == {constraints.recompute}
    assert truth.best is not None and found.best is not None, "each case has a plan that fits"
    assert found.best.step_time_s == pytest.approx(truth.best.step_time_s, rel=REL), (found.best.config, truth.best.config)
    assert all(constraints.allows(k, getattr(found.best.config, k)) for k in DIMS)
    free = search_plan(spec, hw, BASE)  # equal to the exhaustive optimum (test_exhaustive_matches_search)
    assert free.best is not None and free.best.step_time_s <= truth.best.step_time_s * (1 + REL)


def test_an_upper_bound_replaces_the_default_cap() -> None:
    spec, hw = model(2), cluster()
    wide = replace(BASE, constraints=Constraints(tp=(4, 4), recompute="none"))  # 4 > the 2 GPUs per node
    assert {m.tp for m in meshes(spec, hw, wide)} == {4}
    assert {c.tp for c in configurations(spec, hw, wide)} == {4}
    assert max(m.tp for m in meshes(spec, hw, BASE)) == 2
    many = replace(BASE, global_batch=64, gpus=1, constraints=Constraints(micro_batch=(32, None)))
    assert sorted({o.micro_batch for m in meshes(spec, hw, many) for o in options(spec, hw, m, many)}) == [32, 64]


def test_an_empty_constrained_space_names_the_nearest_configuration() -> None:
    spec, hw = model(2), cluster()
    req = replace(BASE, constraints=Constraints(tp=(2, 2), micro_batch=(3, 3)))
    assert not list(configurations(spec, hw, req))
    result = search_plan(spec, hw, req)
    assert result.best is None and result.nearest_miss is None
    assert result.hints[0].startswith("no configuration satisfies the constraints (tp 2, micro-batch 3); nearest: tp 2 x ")
    option, broken = closest_unconstrained(spec, hw, req)
    assert option.tp == 2 and option.micro_batch in (2, 4) and broken == [f"micro-batch {option.micro_batch} (asked micro-batch 3)"]


def test_nothing_fits_within_the_constraints_names_a_constrained_miss() -> None:
    spec, hw = model(2), cluster(hbm_gib=0.003)
    req = replace(BASE, constraints=Constraints(zero=(0, 0), recompute="none"))
    result = search_plan(spec, hw, req)
    assert result.best is None and result.nearest_miss is not None
    miss = result.nearest_miss.config
    assert miss.zero == 0 and miss.recompute == "none"
    assert any("(loosen --zero)" in h for h in result.hints) and any("(loosen --recompute)" in h for h in result.hints)
