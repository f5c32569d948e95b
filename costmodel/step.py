"""One training step: per-stage sums of layer costs, the pipeline schedule, data-parallel gradient
reduction, the optimizer step, and the memory of every pipeline rank.

Skeleton (costmodel-notes 2.8, after Calculon): per micro-batch, per rank, X_r = forward + backward +
recompute + exposed TP/CP/EP/ZeRO-3 communication (+ the compute slowdown while hidden communication
runs); the pipeline takes m·max X + fill/drain (``costmodel.pipeline``); then the exposed pipeline
send/receive, the exposed gradient reduction and parameter gather, and the optimizer step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from costmodel import comm
from costmodel.engines import grad_bucket_params
from costmodel.headroom import usable_gib
from costmodel.offload import activation_offload_time, optimizer_offload_time
from costmodel.optimizer import ADAM_BYTES_PER_PARAM, accumulation_bytes, gradient_pass_bytes
from costmodel.precision import fp8_gemm_speedup
from costmodel.local import LocalConfig
from costmodel.memory import GIB
from costmodel.pipeline import p2p_exposed, pipeline_time_folded
from costmodel.ranks import Ranks, RankSums, rank_costs
from costmodel.specs import EfficiencySpec, ParallelConfig
from costmodel.table import CostTable
from costmodel.rank_memory import (  # noqa: F401 (re-exported: the step's memory terms)
    FRAGMENTATION, FSDP2_PP_GATHERED_BYTES, FSDP2_STATE_BYTES, FSDP2_UNIT_BYTES, rank_allocated_bytes, rank_gpu_only_bytes, rank_memory, rank_parts,
)
from costmodel.rank_memory import engine_terms_memo as _terms

STEP_FIXED_S: float = EfficiencySpec.model_fields["step_fixed_s"].default
"""Default fixed time per training step outside the layers' kernels: launching the optimizer and
gradient-norm kernels, the loss / gradient-norm / overflow synchronisations that drain the GPU's
queue, data loading and logging. Published end-to-end throughputs include it (Megatron-LM README:
"include all operations including data loading, optimizer steps, communication, and even logging").
Host-side time does not scale with the accelerator, so one global value (what grows with the number
of nodes is :data:`STRAGGLER_DELAY_S`'s term): fitted with it by
``bench/calibrate.py`` on the shared published runs (``planner/reference/published_runs.csv``, a copy of the shared reference file).
It is the default of ``EfficiencySpec.step_fixed_s``; a cluster file may state its own (``meshplan calibrate``)."""
STRAGGLER_DELAY_S = 0.04
"""Mean per-node delay of a synchronous step (OS and host jitter, data loading, network congestion),
taken as exponentially distributed and independent across nodes. Every step waits at its
collectives for the slowest of N nodes, whose expected delay is the mean times the harmonic number
H_N (order statistics of the exponential: Rényi's representation), so the step grows by
σ·(H_N − 1) over a one-node run, about σ·ln N: step time grows with the node count as measured runs
do (Narayanan et al. 2021 Table 2 PTD-P rows, MosaicML's 128 -> 512 GPU rows). Fitted with
``efficiency.step_fixed_s`` by ``bench/calibrate.py`` on the shared published runs (knob
``straggler_s``)."""
@dataclass(frozen=True)
class StepEstimate:
    """Predicted time and memory of one training step (see ``ParallelConfig`` for the inputs)."""

    step_time_s: float
    model_flops: float
    time_breakdown_s: dict[str, float]
    link_time_s: dict[str, float]
    memory_breakdown_gib: dict[str, float]
    """Of the pipeline rank with the largest peak."""
    peak_memory_gib: float
    capacity_gib: float
    ranks: Ranks
    table: CostTable
    config: ParallelConfig
    pipeline_s: float = 0.0
    """Time of the pipelined micro-batches (compute, recompute, exposed per-layer communication, bubble)."""

    @property
    def rank_time_s(self) -> list[float]:
        """Per micro-batch forward + backward + recompute + exposed communication of each rank."""
        slow = self.table.cluster.efficiency.overlap_slowdown
        return [self.ranks.rank(r).time_s(slow) for r in range(self.config.pp)]

    @cached_property
    def _rank_memories(self) -> tuple[dict[str, float], ...]:
        """:func:`rank_memory` of each pipeline rank, computed once per estimate (the estimate is frozen)."""
        return tuple(rank_memory(self.table, self.config, self.ranks.rank(r), r) for r in range(self.config.pp))

    @property
    def rank_memory_breakdown_gib(self) -> list[dict[str, float]]:
        """Memory breakdown of each pipeline rank, GiB (fresh dicts: a caller may change them)."""
        return [dict(parts) for parts in self._rank_memories]

    def rank_memory_parts_gib(self, r: int) -> tuple[dict[str, float], dict[str, float]]:
        """(allocated tensors by category, GPU-only terms) of pipeline rank ``r``, GiB
        (:func:`rank_allocated_bytes`, :func:`rank_gpu_only_bytes`)."""
        tracked, gpu = rank_parts(self.table, self.config, self.ranks.rank(r), r)
        return {k: v / GIB for k, v in tracked.items()}, {k: v / GIB for k, v in gpu.items()}

    @property
    def rank_memory_gib(self) -> list[float]:
        """Peak memory of each pipeline rank, GiB."""
        return [sum(parts.values()) for parts in self._rank_memories]

    @property
    def fits(self) -> bool:
        return self.peak_memory_gib <= self.capacity_gib

    @property
    def over_by_gib(self) -> float:
        return max(0.0, self.peak_memory_gib - self.capacity_gib)


def _fp8_speedup(table: CostTable, cfg: ParallelConfig) -> float:
    """FP8 over BF16 GEMM rate on the table's cluster, 1 for bf16 (memoised)."""
    if cfg.precision != "fp8":
        return 1.0
    hit = table.memo.get("fp8_speedup")
    if hit is None:
        hit = table.memo["fp8_speedup"] = fp8_gemm_speedup(table.cluster)
    return hit


def view_key(cfg: ParallelConfig, recompute: str) -> tuple:
    """Every field of ``cfg`` that :func:`local_config` reads, with ``recompute``: equal keys give
    equal views on one table, so a search can memoise per-view sums by this plain tuple instead of
    building and hashing a :class:`LocalConfig` per option (keep it in step with ``local_config``;
    ``tests/costmodel/test_view_key.py`` changes every field and checks that a changed view changes
    the key)."""
    return (recompute, cfg.micro_batch, cfg.seq_len, cfg.tp, cfg.cp, cfg.ep, cfg.sp, cfg.attention, cfg.zero == 3, cfg.zero in (1, 2),
            cfg.dp * cfg.cp if cfg.zero == 3 else 0, cfg.pp > 1, cfg.engine, cfg.compile, cfg.loss_fusion,
            cfg.grad_reduce_bytes, cfg.tp_comm_overlap, cfg.zero3_bucket_params, cfg.overlap_param_gather, cfg.precision,
            cfg.tp_async_backward, cfg.grad_accum_fusion)


def local_config(table: CostTable, cfg: ParallelConfig, recompute: str) -> LocalConfig:
    """The per-layer view of ``cfg`` for layers recomputed as ``recompute`` (what it reads is
    listed by :func:`view_key`)."""
    return LocalConfig(
        micro_batch=cfg.micro_batch,
        seq_len=table.model.tokens_per_sample or cfg.seq_len,
        tp=cfg.tp,
        cp=cfg.cp,
        ep=cfg.ep,
        sp=cfg.sp and cfg.tp > 1,
        recompute=recompute,  # type: ignore[arg-type]
        flash=cfg.attention == "flash",
        zero3_group=cfg.dp * cfg.cp if cfg.zero == 3 and not _terms(table, cfg).fsdp_keeps_gathered else 1,
        grad_reduce_bytes=cfg.grad_reduce_bytes,
        tp_comm_overlap=cfg.tp_comm_overlap,
        zero3_bucket_params=cfg.zero3_bucket_params,
        zero3_overlap=cfg.overlap_param_gather,
        terms=_terms(table, cfg),
        fp8_speedup=_fp8_speedup(table, cfg),
    )


def estimate_step(table: CostTable, cfg: ParallelConfig) -> StepEstimate:
    """Predict step time and per-GPU memory of ``cfg`` for the table's model on its cluster."""
    m = cfg.num_microbatches
    r = rank_costs(table, cfg, lambda rc: local_config(table, cfg, rc))
    slow = table.cluster.efficiency.overlap_slowdown
    per_mb = [t.time_s(slow) for t in r.types]
    total = sum(x * n for x, n in zip(per_mb, r.count))
    pipe_s, bubble_s = pipeline_time_folded(max(per_mb), total, m, cfg.vpp, cfg.schedule)
    straggler_s = straggler_time(cfg.num_gpus, table.cluster.gpus_per_node)
    crit = r.types[per_mb.index(max(per_mb))]
    pp_link, pp_exposed = _pipeline_comm(table, cfg, r, m)
    dp_link, dp_exposed = _data_parallel_comm(table, cfg, r, m)
    optimizer_s = max(_optimizer_time(table, cfg, t) for t in r.types)
    offload_s = _offload_time(table, cfg, r, m)
    accumulate_s = max(_accumulation_time(table, cfg, t) for t in r.types)
    breakdown = {
        "compute": m * (crit.fwd_s + crit.bwd_s) + accumulate_s,
        "exposed_comm": m * (crit.exposed_s + slow * crit.hidden_s) + pp_exposed + dp_exposed + offload_s + straggler_s,
        "pipeline_bubble": bubble_s,
        "recompute": m * crit.recompute_s,
        "optimizer": optimizer_s,
    }
    links = {k: m * crit.links[k] for k in ("tp", "cp", "ep")}
    links["pp"], links["dp"] = pp_link, dp_link + m * crit.links["dp"]
    memories = [rank_memory(table, cfg, t, first) for t, first in zip(r.types, r.first_rank)]
    peaks = [sum(x.values()) for x in memories]
    top = peaks.index(max(peaks))
    return StepEstimate(
        step_time_s=pipe_s + accumulate_s + pp_exposed + dp_exposed + optimizer_s + offload_s + straggler_s,
        model_flops=table.model_flops(cfg.global_batch, cfg.seq_len),
        time_breakdown_s=breakdown,
        link_time_s=links,
        memory_breakdown_gib=memories[top],
        peak_memory_gib=peaks[top],
        capacity_gib=usable_gib(table.cluster),
        ranks=r,
        table=table,
        config=cfg,
        pipeline_s=pipe_s,
    )


def straggler_time(gpus: int, gpus_per_node: int, delay_s: float | None = None) -> float:
    """Expected wait for the slowest of N nodes beyond one node's: σ·(H_N − 1) (:data:`STRAGGLER_DELAY_S`)."""
    nodes = max(1, gpus // gpus_per_node)
    harmonic = sum(1.0 / k for k in range(1, nodes + 1)) if nodes <= 64 else math.log(nodes) + 0.5772156649 + 0.5 / nodes
    return (STRAGGLER_DELAY_S if delay_s is None else delay_s) * (harmonic - 1.0)


def _pipeline_comm(table: CostTable, cfg: ParallelConfig, r: Ranks, m: int) -> tuple[float, float]:
    """Activation send/receive between stages: b·s·h per micro-batch each way. Under SP each TP rank
    already holds only its 1/t of it; without SP Megatron's scatter/gather optimisation sends 1/t
    per rank and all-gathers the b·s·h over the TP group's NVLink on arrival (Narayanan et al. 2021
    §4.1). Neighbouring pipeline ranks are ``tp·cp·dp`` ranks apart, so in different nodes once that
    stride reaches a node."""
    if cfg.pp == 1:
        return 0.0, 0.0
    cluster = table.cluster
    full = max(t.boundary_bytes for t in r.types)
    sp = cfg.sp and cfg.tp > 1
    across = cfg.tp * cfg.cp * cfg.dp >= cluster.gpus_per_node
    one = comm.send_recv(cluster, full / (1 if sp else cfg.tp), across)
    if cfg.tp > 1 and not sp:
        one += comm.all_gather(cluster, comm.place_group(cfg.tp, 1, cluster.gpus_per_node), full)
    interleaved = cfg.schedule == "interleaved-1f1b" and cfg.vpp > 1 and _terms(table, cfg).p2p_overlapped
    exposed = p2p_exposed(one, cfg.pp, m, cfg.vpp, overlapped=interleaved)
    return 2 * m * cfg.vpp * one, exposed


def _dp_groups(table: CostTable, cfg: ParallelConfig) -> tuple[comm.Group, comm.Group]:
    """Gradient groups: dense parameters over dp·cp ranks (Megatron's DP group includes CP), expert
    parameters over dp·cp/ep ranks; rank order tp-cp-ep-dp-pp (ecosystem-notes B1)."""
    gpn = table.cluster.gpus_per_node
    dense = comm.place_group(cfg.dp * cfg.cp, cfg.tp, gpn)
    expert = comm.place_group(max(1, cfg.dp * cfg.cp // cfg.ep), cfg.tp * cfg.ep, gpn)
    return dense, expert


def _data_parallel_comm(table: CostTable, cfg: ParallelConfig, r: Ranks, m: int) -> tuple[float, float]:
    """(link, exposed) time of the end-of-step gradient reduction and parameter gather.

    ZeRO-0: all-reduce of gradients (2Ψ); ZeRO-1/2: reduce-scatter gradients, all-gather updated
    parameters (same 2Ψ, ZeRO §7); ZeRO-3 communicates per layer instead (``costmodel.local``),
    except FSDP2 under pipelining, which gathers and reduces once per step like ZeRO-1. With
    ``overlap_grad_reduce`` the reduction runs in buckets (:func:`costmodel.engines.grad_bucket_params`, one collective
    each) behind the last micro-batch's backward, and only the last bucket, or what does not fit
    behind the backward, is exposed; with ``overlap_param_gather`` the gather runs in the same
    buckets behind the next step's first forward, all but the first bucket hidden. A
    rank r stages later in the pipeline finishes its backward earlier, which gives it slack (a type's
    first rank has the least).
    """
    keeps = _terms(table, cfg).fsdp_keeps_gathered  # FSDP2 under PP: one gather and one reduction per step
    if (cfg.zero == 3 and not keeps) or cfg.dp * cfg.cp == 1:
        return 0.0, 0.0
    (dense_red, expert_red), (dense_ag, expert_ag) = _dp_coefficients(table, cfg)
    per_step = 1 if cfg.zero < 2 or keeps else m
    link = exposed = 0.0
    for t, first in zip(r.types, r.first_rank):
        dense, expert = t.params - t.expert_params, t.expert_params
        buckets = max(1, math.ceil(t.params / grad_bucket_params(cfg))) if cfg.overlap_grad_reduce else 1
        red, red_last = _bucketed(dense_red, expert_red, dense, expert, cfg.grad_reduce_bytes, buckets)
        red *= per_step
        red_exposed = red
        if cfg.overlap_grad_reduce and not (cfg.pp > 1 and _terms(table, cfg).dp_after_flush):
            red_exposed = max(red_last, red - t.bwd_s * per_step)
        gather, gather_first = _bucketed(dense_ag, expert_ag, dense, expert, cfg.param_bytes, buckets) if cfg.zero else (0.0, 0.0)
        gather_exposed = max(gather_first, gather - t.fwd_s) if cfg.overlap_param_gather else gather
        slack = first * (t.fwd_s + t.bwd_s) / cfg.vpp
        exposed = max(exposed, red_exposed + gather_exposed - slack)
        link = max(link, red + gather)
    return link, exposed


def _bucketed(dense_cost: comm.Cost, expert_cost: comm.Cost, dense: float, expert: float, nbytes: float,
              buckets: int) -> tuple[float, float]:
    """(all buckets, one bucket) of a bucketed collective over ``dense`` + ``expert`` parameters of
    ``nbytes`` each. The buckets are sized so that the ring's chunks stay bandwidth-bound (Megatron's
    max(40M, 1M x dp) rule, :data:`GRAD_BUCKET_PARAMS`) and are issued back to back as their
    gradients become ready, so NCCL pipelines them like one collective: the whole costs one
    collective's latency [assumption]; the one bucket, a collective of its own, is what cannot
    overlap (the last gradient bucket after the backward, the first parameter bucket before the next
    forward)."""
    whole = dense_cost(dense * nbytes) + expert_cost(expert * nbytes)
    one = dense_cost(dense * nbytes / buckets) + expert_cost(expert * nbytes / buckets)
    return whole, min(whole, one)


def _dp_coefficients(table: CostTable, cfg: ParallelConfig) -> tuple[tuple[comm.Cost, comm.Cost], tuple[comm.Cost, comm.Cost]]:
    """Costs of the gradient reduction and the parameter gather, dense and expert (memoised per
    layout): all-reduce for ZeRO-0, reduce-scatter otherwise."""
    key = ("dp", cfg.tp, cfg.cp, cfg.dp, cfg.ep, cfg.zero)
    hit = table.memo.get(key)
    if hit is None:
        dense_g, expert_g = _dp_groups(table, cfg)
        passes = 2 if cfg.zero == 0 else 1
        reduce = (comm.ring_cost(table.cluster, dense_g, passes), comm.ring_cost(table.cluster, expert_g, passes))
        gather = (comm.ring_cost(table.cluster, dense_g), comm.ring_cost(table.cluster, expert_g))
        hit = table.memo[key] = (reduce, gather)
    return hit


def _local_params(cfg: ParallelConfig, t: RankSums) -> float:
    """Parameters whose optimizer step this GPU runs (its ZeRO shard)."""
    shard_dense = cfg.dp * cfg.cp if cfg.zero >= 1 else 1
    shard_expert = max(1, cfg.dp * cfg.cp // cfg.ep) if cfg.zero >= 1 else 1
    return (t.params - t.expert_params) / shard_dense + t.expert_params / shard_expert


def _offload_time(table: CostTable, cfg: ParallelConfig, r: Ranks, m: int) -> float:
    """Exposed host-offload time of the slowest rank type (``costmodel.offload``)."""
    worst = 0.0
    for t in r.types:
        seconds = 0.0
        if cfg.offload_optimizer:
            seconds += optimizer_offload_time(table.cluster, _local_params(cfg, t), cfg.grad_reduce_bytes, cfg.param_bytes, t.bwd_s)
        if cfg.offload_activations:
            seconds += m * activation_offload_time(table.cluster, t.act_bytes, t.fwd_s + t.bwd_s)
        worst = max(worst, seconds)
    return worst


def _accumulation_time(table: CostTable, cfg: ParallelConfig, t: RankSums) -> float:
    """Seconds a rank spends adding micro-batch gradients into the accumulated ones
    (:func:`costmodel.optimizer.accumulation_bytes`, memory-bound). It sits inside every micro-batch's
    backward, so the slowest rank's adds extend the pipeline's steady state."""
    nbytes = accumulation_bytes(cfg, _terms(table, cfg), t.params, _local_params(cfg, t))
    return nbytes / (table.cluster.gpu.hbm_bandwidth_gbps * 1e9 * table.cluster.efficiency.memory)


def _optimizer_time(table: CostTable, cfg: ParallelConfig, t: RankSums) -> float:
    """Adam over the parameters a GPU updates (its shard under ZeRO ≥ 1), memory-bound, with the
    gradient passes around it (:func:`costmodel.optimizer.gradient_pass_bytes`), plus the step's fixed cost (the
    cluster's ``efficiency.step_fixed_s``, default :data:`STEP_FIXED_S`). Affine in ``t.params`` and
    ``t.expert_params`` (``search.bounds`` relies on it)."""
    shard = _local_params(cfg, t)
    local = 0.0 if cfg.offload_optimizer else shard
    eff = table.cluster.efficiency
    bandwidth = table.cluster.gpu.hbm_bandwidth_gbps * 1e9 * eff.memory
    terms = _terms(table, cfg)
    host = cfg.num_microbatches * terms.microbatch_host_s
    passes = gradient_pass_bytes(cfg, terms, local, shard if cfg.zero >= 2 else t.params)
    return (ADAM_BYTES_PER_PARAM * local + passes) / bandwidth + 4 * eff.kernel_overhead_us * 1e-6 + eff.step_fixed_s + host
