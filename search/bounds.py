"""Lower bounds on a base option's step time over every stage split and recomputation.

Each layer costs at least its fastest option (no recomputation) per micro-batch, so the ranks' sum
S is at least the sum of those. The schedule's step, m·max X + (S − max X)/d (d = 1 for 1F1B and
GPipe, v for interleaved 1F1B, 3 for ZB-H1; ``costmodel.pipeline``), is at least
(m − 1/d)·S/p + S/d because max X ≥ S/p. Communication outside the pipeline adds non-negative time
and the optimizer at least the step's fixed cost (the cluster's ``efficiency.step_fixed_s``), and every
configuration on the same GPUs waits the same for stragglers (``costmodel.step.straggler_time``), so
the bound holds for the whole step.
"""

from __future__ import annotations

import numpy as np

from costmodel.memory import GIB, model_state_bytes
from costmodel.pipeline import ZB_H1_BUBBLE_SHARE
from costmodel.flops import model_flops_per_step
from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig
from costmodel.step import local_config, straggler_time
from costmodel.table import CostTable
from search.types import SearchRequest


def bubble_divisor(cfg: ParallelConfig) -> float:
    """d in the bound: how much the schedule shrinks the fill-and-drain term."""
    if cfg.schedule == "interleaved-1f1b":
        return float(cfg.vpp)
    if cfg.schedule == "zb-h1":
        return 1.0 / ZB_H1_BUBBLE_SHARE
    return 1.0


def fastest_sum_s(table: CostTable, cfg: ParallelConfig, memo: dict | None = None) -> float:
    """Sum over all layers of their fastest per-micro-batch time under ``cfg``'s local view."""
    view = local_config(table, cfg, "none")
    if memo is not None and ("time", view) in memo:
        return memo["time", view]
    slow = table.cluster.efficiency.overlap_slowdown
    counts = np.bincount(table.layer_group, minlength=len(table.groups))
    total = 0.0
    for g, n in enumerate(counts):
        c = table.cost(g, view)
        total += n * (c.fwd_s + c.bwd_s + c.comm_exposed_s + slow * c.comm_hidden_s)
    if memo is not None:
        memo["time", view] = total
    return total


def bound_s(table: CostTable, cfg: ParallelConfig, memo: dict | None = None) -> float:
    """A lower bound on the step time of ``cfg`` over every split and recomputation (``memo``, a
    dict the caller owns, caches the per-layer sums shared by options with the same local view)."""
    total = fastest_sum_s(table, cfg, memo)
    d = bubble_divisor(cfg)
    fixed = table.cluster.efficiency.step_fixed_s + straggler_time(cfg.tp * cfg.pp * cfg.dp * cfg.cp, table.cluster.gpus_per_node)
    return (cfg.num_microbatches - 1.0 / d) * total / cfg.pp + total / d + fixed


def _memory_sums(table: CostTable, cfg: ParallelConfig, memo: dict | None) -> tuple[float, float, float]:
    none = local_config(table, cfg, "none")
    if memo is not None and ("memory", none) in memo:
        return memo["memory", none]
    full = local_config(table, cfg, "full")
    counts = np.bincount(table.layer_group, minlength=len(table.groups))
    params = expert = act = 0.0
    for g, n in enumerate(counts):
        base = table.cost(g, none)
        params += n * base.params
        expert += n * base.expert_params
        act += n * min(base.act_bytes, table.cost(g, full).act_bytes)
    if memo is not None:
        memo["memory", none] = (params, expert, act)
    return params, expert, act


def memory_bound_gib(table: CostTable, cfg: ParallelConfig, memo: dict | None = None) -> float:
    """A lower bound on the peak memory per GPU over every split and recomputation: some rank holds
    at least 1/p of the model states (ZeRO-sharded as ``cfg`` says) and at least 1/p of the
    activations stored under full recomputation, for at least one micro-batch."""
    params, expert, act = _memory_sums(table, cfg, memo)
    sizes = (cfg.param_bytes, cfg.grad_bytes, cfg.optimizer_bytes)
    shard = cfg.dp * cfg.cp
    states = sum(model_state_bytes(params - expert, shard, cfg.zero, *sizes))
    states += sum(model_state_bytes(expert, max(1, shard // cfg.ep), cfg.zero, *sizes))
    return (states + act) / cfg.pp / GIB + table.cluster.runtime_overhead_gib


def compute_floor_s(model: ModelSpec, cluster: ClusterSpec, req: SearchRequest) -> float:
    """A lower bound on every plan's step: the model FLOPs at every GPU's dense peak, plus the
    step's fixed cost. No kernel beats the peak and recomputation only adds work."""
    flops = model_flops_per_step(model.layers, req.global_batch, req.seq_len)
    peak = cluster.gpu.peak_bf16_tflops
    if "fp8" in req.precisions and cluster.gpu.peak_fp8_tflops is not None:  # FP8 GEMMs beat the BF16 peak
        peak = max(peak, cluster.gpu.peak_fp8_tflops)
    return flops / (req.gpus * peak * 1e12) + cluster.efficiency.step_fixed_s + straggler_time(req.gpus, cluster.gpus_per_node)
