"""The serving search against an independent brute force, its targets, frontier and refusals."""

from __future__ import annotations

import pytest

from costmodel.serving.deployment import aggregated
from planner.serving.estimate import workload
from planner.serving.request import context
from search.serving import ServingTargets, search_serving
from search.serving.core import pareto
from search.serving.space import batches, instances


@pytest.fixture(scope="module")
def llama70b():
    return context(model="llama3.1-70b", cluster="dgx-h100", gpus=8, isl=1000, osl=1000, precision="fp8")


def _search(ctx, **targets):
    return search_serving(ctx.hardware, ctx.shape, workload(ctx), ctx.engine, 8, ServingTargets(**targets))


def test_aggregated_best_equals_the_brute_force_maximum(llama70b) -> None:
    """Without targets the best aggregated deployment is the maximum over every instance and batch of
    the deployment estimate, priced here one by one with ``costmodel.serving.deployment.aggregated``."""
    ctx = llama70b
    result = _search(ctx, disaggregation="off")
    brute = 0.0
    for inst in instances(ctx.shape, 8, 8):
        top = aggregated(ctx.hardware, ctx.shape, inst, 8 // inst.gpus, workload(ctx), ctx.engine)
        if not top.fits:
            continue
        for b in batches(top.decode.max_concurrency):
            est = aggregated(ctx.hardware, ctx.shape, inst, 8 // inst.gpus, workload(ctx), ctx.engine, b * (8 // inst.gpus))
            brute = max(brute, est.per_gpu)
    assert result.ranked[0].per_gpu == pytest.approx(brute, rel=1e-9)
    assert all(c.mode == "aggregated" for c in result.ranked)


def test_every_ranked_deployment_meets_the_targets(llama70b) -> None:
    result = _search(llama70b, ttft_s=0.5, tpot_s=0.03)
    assert result.ranked and all(c.ttft_s <= 0.5 and c.tpot_s <= 0.03 for c in result.ranked)
    assert result.ranked == sorted(result.ranked, key=lambda c: c.key())
    assert all(c.gpus <= 8 for c in result.ranked)


def test_disaggregation_on_only_yields_disaggregated(llama70b) -> None:
    result = _search(llama70b, disaggregation="on")
    assert result.ranked and all(c.mode == "disaggregated" and c.prefill_workers >= 1 for c in result.ranked)


def test_impossible_targets_give_the_nearest_miss(llama70b) -> None:
    result = _search(llama70b, tpot_s=0.001)
    assert not result.ranked and result.nearest_miss is not None
    assert result.nearest_miss.tpot_s == min(c.tpot_s for c in result.fitting)


def test_frontier_is_pareto_optimal(llama70b) -> None:
    result = _search(llama70b)
    front = result.frontier
    assert front == pareto(result.fitting)
    for f in front:
        assert not any(c.per_gpu > f.per_gpu + 1e-9 and c.tokens_per_user > f.tokens_per_user + 1e-9 for c in result.fitting)


def test_nothing_fits_reports_the_shortfall() -> None:
    ctx = context(model="llama3.1-405b", cluster="dgx-h100", gpus=2, isl=100, osl=100, precision="bf16")
    result = search_serving(ctx.hardware, ctx.shape, workload(ctx), ctx.engine, 2, ServingTargets())
    assert not result.ranked and result.nearest_miss is None
    assert result.smallest_shortfall_bytes / 2**30 > 300


def test_moe_space_has_expert_and_attention_dp_variants() -> None:
    ctx = context(model="qwen3-235b-a22b", cluster="dgx-h200", gpus=16, isl=100, osl=100, precision="fp8")
    found = list(instances(ctx.shape, 16, 8))
    assert any(i.ep == i.tp > 1 and i.attention_dp for i in found)
    assert any(i.tp == 16 and i.ep == 16 for i in found)  # wide EP across two nodes
    assert all(i.tp <= 8 or i.attention_dp for i in found)


def test_trtllm_search_prices_the_host_bound_step_as_the_estimate() -> None:
    """TensorRT-LLM's host work per request (``costmodel.serving.host``) bounds a large batch of a
    small model; the search's best aggregated point equals the estimate's brute-force maximum there."""
    ctx = context(model="llama3.1-8b", cluster="dgx-b200", gpus=1, isl=1024, osl=1024, precision="fp8", engine="trtllm")
    result = search_serving(ctx.hardware, ctx.shape, workload(ctx), ctx.engine, 1, ServingTargets(disaggregation="off"))
    inst = next(iter(instances(ctx.shape, 1, 8)))
    top = aggregated(ctx.hardware, ctx.shape, inst, 1, workload(ctx), ctx.engine)
    ests = [aggregated(ctx.hardware, ctx.shape, inst, 1, workload(ctx), ctx.engine, b)
            for b in batches(top.decode.max_concurrency)]
    assert result.ranked[0].per_gpu == pytest.approx(max(e.per_gpu for e in ests), rel=1e-9)
    assert any(e.tpot_s == pytest.approx(e.concurrency * ctx.engine.host_us_per_request * 1e-6) for e in ests)
