"""Heterogeneous pricing: a one-table replica is exactly ``estimate_step``; speeds scale compute and
links; gradient weights give the uniform-batch update; stages are priced on their own group."""

from __future__ import annotations

import pytest

from costmodel.headroom import usable_gib
from costmodel.hetero import gradient_weights, scale_cluster
from costmodel.hetero_step import estimate_replica
from costmodel.specs import ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from tests.search.hetero.cases import node, tiny_model


def test_one_table_replica_is_estimate_step():
    table = build_cost_table(tiny_model(), node("fast", 300, 4.0, 25))
    cfg = ParallelConfig(tp=2, pp=2, dp=3, micro_batch=1, global_batch=12, seq_len=1024, sp=True, zero=1)
    step, replica = estimate_step(table, cfg), estimate_replica([table, table], cfg)
    assert replica.step_time_s == step.step_time_s
    assert max(replica.stage_memory_gib) == pytest.approx(step.peak_memory_gib) and replica.fits == step.fits


def test_mixed_replica_uses_each_stage_group():
    model = tiny_model()
    fast, slow = build_cost_table(model, node("fast", 300, 4.0, 25)), build_cost_table(model, node("slow", 100, 2.0, 25))
    cfg = ParallelConfig(pp=2, dp=1, global_batch=8, seq_len=1024, stage_layers=(4, 3))
    mixed = estimate_replica([fast, slow], cfg)
    assert mixed.stage_time_s[0] == estimate_step(fast, cfg).rank_time_s[0]
    assert mixed.stage_time_s[1] == estimate_step(slow, cfg).rank_time_s[1]
    assert mixed.stage_capacity_gib == (usable_gib(fast.cluster), usable_gib(slow.cluster))  # 4 and 2 GiB less the headroom
    assert estimate_replica([fast, fast], cfg).step_time_s < mixed.step_time_s < estimate_replica([slow, slow], cfg).step_time_s


def test_speed_scales_compute_and_links_only():
    base = node("fast", 300, 4.0, 25)
    half = scale_cluster(base, 0.5)
    assert scale_cluster(base, 1.0) is base
    assert half.gpu.peak_bf16_tflops == 150 and half.gpu.hbm_bandwidth_gbps == 500 and half.gpu.hbm_gib == 4.0
    assert half.network_bandwidth_gbps == 12.5 and half.intra_node_bandwidth_gbps == 75
    assert half.network_latency_us == base.network_latency_us
    slow_step = estimate_step(build_cost_table(tiny_model(), half), ParallelConfig(global_batch=4, seq_len=1024))
    full_step = estimate_step(build_cost_table(tiny_model(), base), ParallelConfig(global_batch=4, seq_len=1024))
    assert slow_step.step_time_s > full_step.step_time_s


def test_gradient_weights_give_the_uniform_update():
    shares = [6, 3, 3]
    grads = [[1.0] * 6, [4.0] * 3, [7.0] * 3]  # per micro-batch gradients
    averaged = [sum(g) / len(g) for g in grads]
    weights = gradient_weights(shares)
    mean_allreduce = sum(w * g for w, g in zip(weights, averaged)) / len(shares)
    assert mean_allreduce == pytest.approx(sum(map(sum, grads)) / sum(shares))
    assert gradient_weights([4, 4]) == (1.0, 1.0)
    with pytest.raises(ValueError):
        gradient_weights([3, 0])
