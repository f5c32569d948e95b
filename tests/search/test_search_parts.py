"""Unit tests of the search's parts against brute force on small models: the recompute knapsack,
the stage dynamic program, the bounds, and the whole search's behaviour (determinism, time limit,
infeasibility)."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from costmodel.specs import (
    ClusterSpec, EfficiencySpec, EmbeddingLayer, GPUSpec, HeadLayer, ModelSpec, NormLayer, ParallelConfig, TransformerLayer,
)
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from search.bounds import bound_s, memory_bound_gib
from search.core import search_plan
from search.recompute import best_recompute, evaluate
from search.stage_model import group_costs, stage_budget
from search.stages import split_one_chunk, stage_evaluator
from search.types import SearchRequest


def tiny_model(layers: int = 6, h: int = 1024, heads: int = 8) -> ModelSpec:
    block = TransformerLayer(hidden_size=h, num_heads=heads, num_kv_heads=heads, head_dim=h // heads, ffn_hidden_size=4 * h, dropout=True)
    body = (EmbeddingLayer(vocab_size=32000, hidden_size=h),) + (block,) * layers
    return ModelSpec(name="tiny", layers=body + (NormLayer(hidden_size=h), HeadLayer(vocab_size=32000, hidden_size=h)))


def tiny_cluster(hbm_gib: float = 8.0) -> ClusterSpec:
    gpu = GPUSpec(name="test-gpu", peak_bf16_tflops=300, hbm_gib=hbm_gib, hbm_bandwidth_gbps=2000)
    eff = EfficiencySpec(gemm_max=0.7, gemm_half_gflop=0.5, attention=0.5, memory=0.7, intra_node=0.8, network=0.8)
    return ClusterSpec(name="test", gpu=gpu, gpus_per_node=4, intra_node_bandwidth_gbps=300, network_bandwidth_gbps=25,
                       intra_node_latency_us=2, network_latency_us=5, efficiency=eff)


@pytest.mark.parametrize("attention", ["flash", "eager"])
@pytest.mark.parametrize("hbm", [3.0, 4.0, 6.0, 40.0])
def test_rank_recompute_matches_brute_force(attention: str, hbm: float) -> None:
    table = build_cost_table(tiny_model(), tiny_cluster(hbm))
    cfg = ParallelConfig(dp=1, micro_batch=2, global_batch=8, seq_len=2048, attention=attention)
    gc = group_costs(table, cfg)
    counts = np.bincount(table.layer_group, minlength=len(table.groups)).astype(float)
    budget = stage_budget(table, cfg, gc, counts, 0, 0.0)
    got = best_recompute(gc, counts, budget)
    g = next(i for i in range(len(counts)) if gc.recomputable[i])
    best = None
    n = int(counts[g])
    for k_full in range(n + 1):
        for k_sel in range(n - k_full + 1):
            choice = np.zeros(gc.time_s.shape)
            choice[:, 0] = counts
            choice[g] = (n - k_full - k_sel, k_sel, k_full)
            t = evaluate(gc, choice, budget)
            if t is not None and (best is None or t < best):
                best = t
    assert (got is None) == (best is None)
    if best is not None:
        assert got[0] == pytest.approx(best, rel=1e-12)


def test_stage_dp_matches_every_split() -> None:
    table = build_cost_table(tiny_model(layers=5), tiny_cluster(5.0))
    cfg = ParallelConfig(pp=3, dp=1, micro_batch=1, global_batch=6, seq_len=2048)
    gc = group_costs(table, cfg)
    f = stage_evaluator(table, cfg, gc, None)
    plans = split_one_chunk(table, cfg, f, table.default_split(3))
    n, m = len(table.layer_group), cfg.num_microbatches
    best = math.inf
    for cut in itertools.combinations(range(1, n), 2):
        bounds = (0,) + cut + (n,)
        times = [f(s, a, b) for s, (a, b) in enumerate(zip(bounds, bounds[1:]))]
        if all(t is not None for t in times):
            xs = [t[0] for t in times]
            best = min(best, (m - 1) * max(xs) + sum(xs))
    assert plans and plans[0].objective_s == pytest.approx(best, rel=1e-12)


def test_bounds_hold_for_every_split() -> None:
    model, cluster = tiny_model(layers=4), tiny_cluster(40.0)
    table = build_cost_table(model, cluster)
    base = ParallelConfig(pp=2, dp=2, micro_batch=1, global_batch=8, seq_len=1024, zero=1)
    n = len(model.layers)
    for cut in range(1, n):
        for rc in ("none", "selective", "full"):
            cfg = base.model_copy(update={"stage_layers": (cut, n - cut), "recompute": rc})
            est = estimate_step(table, cfg)
            assert bound_s(table, base) <= est.step_time_s * (1 + 1e-12)
            assert memory_bound_gib(table, base) <= est.peak_memory_gib * (1 + 1e-12)


def test_search_is_deterministic_and_beats_uniform() -> None:
    model, cluster = tiny_model(), tiny_cluster(6.0)
    req = SearchRequest(gpus=8, global_batch=16, seq_len=2048, top_k=2)
    a, b = search_plan(model, cluster, req), search_plan(model, cluster, req)
    assert a.best is not None and a.best.config == b.best.config
    assert a.best.step_time_s == b.best.step_time_s
    uniform = search_plan(model, cluster, SearchRequest(gpus=8, global_batch=16, seq_len=2048, nonuniform=False))
    assert a.best.step_time_s <= uniform.best.step_time_s
    assert a.stats.status == "optimal" and a.stats.gap == 0.0


def test_infeasible_search_names_the_nearest_miss() -> None:
    result = search_plan(tiny_model(h=4096, heads=32), tiny_cluster(0.5), SearchRequest(gpus=2, global_batch=4, seq_len=4096))
    assert result.best is None
    assert result.nearest_miss is not None and result.nearest_miss.estimate.over_by_gib > 0
    assert any("GPUs" in h for h in result.hints)
    assert not any("time-limit" in h for h in result.hints)


def test_search_cut_short_by_its_time_limit_says_so() -> None:
    request = SearchRequest(gpus=2, global_batch=4, seq_len=4096, time_limit_s=1e-9)
    result = search_plan(tiny_model(h=4096, heads=32), tiny_cluster(0.5), request)
    assert result.best is None and result.stats.status == "timeout"
    assert "time-limit" in result.hints[0] and any("GPUs" in h for h in result.hints)


TIME_LIMIT_PROBE = """
import json, time
from types import SimpleNamespace
import search.core, search.frontier
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
from search.core import search_plan
from search.types import SearchRequest
search.core.time = search.frontier.time = SimpleNamespace(perf_counter=time.process_time)
model, cluster = resolve_model_arg("gpt3-175b"), resolve_cluster_arg("dgx-a100")
out = {}
for name, limit in (("limited", 0.08), ("unlimited", None)):
    start = time.process_time()
    result = search_plan(model, cluster, SearchRequest(gpus=1024, global_batch=1536, seq_len=2048, target="megatron", time_limit_s=limit))
    out[name] = (time.process_time() - start, result.stats.status, result.best is not None)
print(json.dumps(out))
"""
"""Times a 0.08 s-limited search of GPT-3 175B on 1,024 A100s for Megatron-LM (whose space, with CP,
is larger than the native target's) and the same search unlimited, on the
process's CPU clock (which the search is made to use), in a fresh process."""


def test_time_limit_is_honoured() -> None:
    """A time-limited search stops near its limit. It runs on the process's CPU clock, so that other
    work on a shared machine neither eats the limit nor stretches the check (the deadline logic is
    the same on either clock), and in a fresh process: inside the full suite the same search once
    used 1.24 CPU s for a 0.3 s limit (0.30 s alone) while the unlimited one used 1.48 s (1.0-1.3
    alone), so the suite's process, not the search, set the figure. The check compares with the
    same search unlimited, run under the same load: it needs over 3x the limit, so a search that
    ignored the limit fails."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", TIME_LIMIT_PROBE], cwd=root, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (used, status, found), (unlimited, _, _) = out["limited"], out["unlimited"]
    assert found and status == "timeout"
    assert used <= 0.6 * unlimited, (used, unlimited)  # enumeration before the clock can stop is bounded too
