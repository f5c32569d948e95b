"""One training step: per-stage sums of layer costs, the pipeline schedule, data-parallel gradient
reduction, the optimizer step, and the memory of every pipeline rank.

Skeleton (costmodel-notes 2.8, after Calculon): per micro-batch, per rank, X_r = forward + backward +
recompute + exposed TP/CP/EP/ZeRO-3 communication (+ the compute slowdown while hidden communication
runs); the pipeline takes m·max X + fill/drain (``costmodel.pipeline``); then the exposed pipeline
send/receive, the exposed gradient reduction and parameter gather, and the optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodel import comm
from costmodel.local import LocalConfig
from costmodel.memory import GIB, in_flight_microbatches, model_state_bytes
from costmodel.pipeline import p2p_exposed, pipeline_time
from costmodel.ranks import Ranks, rank_costs
from costmodel.specs import ParallelConfig
from costmodel.table import CostTable

ADAM_BYTES_PER_PARAM = 30
"""Adam step traffic per local parameter: read fp32 grad, master, m, v (16 B), write master, m, v
(12 B) and the bf16 copy (2 B) (costmodel-notes 2.3, derived)."""
GRAD_BUCKET_PARAMS = 40_000_000
"""Megatron DDP gradient bucket size in parameters (``--ddp-bucket-size`` default 40M): the last
bucket's reduction cannot overlap backward."""
FRAGMENTATION = 0.05
"""Allocator slack on activations (Megatron's estimator multiplies activations by 1.05)."""


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
    rank_memory_gib: np.ndarray
    rank_time_s: np.ndarray
    """Per micro-batch forward + backward + recompute + exposed communication of each rank."""

    @property
    def fits(self) -> bool:
        return self.peak_memory_gib <= self.capacity_gib

    @property
    def over_by_gib(self) -> float:
        return max(0.0, self.peak_memory_gib - self.capacity_gib)


def local_config(table: CostTable, cfg: ParallelConfig, recompute: str) -> LocalConfig:
    """The per-layer view of ``cfg`` for layers recomputed as ``recompute``."""
    return LocalConfig(
        micro_batch=cfg.micro_batch,
        seq_len=table.model.tokens_per_sample or cfg.seq_len,
        tp=cfg.tp,
        cp=cfg.cp,
        ep=cfg.ep,
        sp=cfg.sp and cfg.tp > 1,
        recompute=recompute,  # type: ignore[arg-type]
        flash=cfg.attention == "flash",
        zero3_group=cfg.dp * cfg.cp if cfg.zero == 3 else 1,
        grad_reduce_bytes=cfg.grad_reduce_bytes,
        tp_comm_overlap=cfg.tp_comm_overlap,
        zero3_bucket_params=cfg.zero3_bucket_params,
        zero3_overlap=cfg.overlap_param_gather,
    )


def estimate_step(table: CostTable, cfg: ParallelConfig) -> StepEstimate:
    """Predict step time and per-GPU memory of ``cfg`` for the table's model on its cluster."""
    m = cfg.num_microbatches
    r = rank_costs(table, cfg, lambda rc: local_config(table, cfg, rc))
    slow = table.cluster.efficiency.overlap_slowdown
    comm_mb = r.exposed_s + slow * r.hidden_s
    per_mb = r.fwd_s + r.bwd_s + r.recompute_s + comm_mb
    pipe_s, bubble_s = pipeline_time(per_mb.tolist(), m, cfg.vpp, cfg.schedule)
    crit = int(np.argmax(per_mb))
    pp_link, pp_exposed = _pipeline_comm(table, cfg, r)
    dp_link, dp_exposed = _data_parallel_comm(table, cfg, r)
    optimizer_s = float(_optimizer_time(table, cfg, r).max())
    breakdown = {
        "compute": m * float(r.fwd_s[crit] + r.bwd_s[crit]),
        "exposed_comm": m * float(comm_mb[crit]) + pp_exposed + dp_exposed,
        "pipeline_bubble": bubble_s,
        "recompute": m * float(r.recompute_s[crit]),
        "optimizer": optimizer_s,
    }
    links = {k: m * float(r.links[k][crit]) for k in ("tp", "cp", "ep")}
    links["pp"], links["dp"] = pp_link, dp_link + m * float(r.links["dp"][crit])
    memory = _rank_memory(table, cfg, r)
    totals = sum(memory.values())
    top = int(np.argmax(totals))
    return StepEstimate(
        step_time_s=pipe_s + pp_exposed + dp_exposed + optimizer_s,
        model_flops=table.model_flops(cfg.global_batch, cfg.seq_len),
        time_breakdown_s=breakdown,
        link_time_s=links,
        memory_breakdown_gib={k: float(v[top]) for k, v in memory.items()},
        peak_memory_gib=float(totals[top]),
        capacity_gib=table.cluster.gpu.hbm_gib,
        ranks=r,
        rank_memory_gib=totals,
        rank_time_s=per_mb,
    )


def _pipeline_comm(table: CostTable, cfg: ParallelConfig, r: Ranks) -> tuple[float, float]:
    """Activation send/receive between stages: b·s·h per micro-batch each way, ÷t with SP or
    Megatron's scatter/gather optimisation (Narayanan et al. 2021 §4.1). Neighbouring pipeline ranks
    are ``tp·cp·dp`` ranks apart, so in different nodes once that stride reaches a node."""
    if cfg.pp == 1:
        return 0.0, 0.0
    nbytes = float(r.boundary_bytes.max()) / (1 if cfg.sp and cfg.tp > 1 else cfg.tp)
    across = cfg.tp * cfg.cp * cfg.dp >= table.cluster.gpus_per_node
    one = comm.send_recv(table.cluster, nbytes, across)
    interleaved = cfg.schedule == "interleaved-1f1b" and cfg.vpp > 1
    exposed = p2p_exposed(one, cfg.pp, cfg.num_microbatches, cfg.vpp, overlapped=interleaved)
    return 2 * cfg.num_microbatches * cfg.vpp * one, exposed


def _dp_groups(table: CostTable, cfg: ParallelConfig) -> tuple[comm.Group, comm.Group]:
    """Gradient groups: dense parameters over dp·cp ranks (Megatron's DP group includes CP), expert
    parameters over dp·cp/ep ranks; rank order tp-cp-ep-dp-pp (ecosystem-notes B1)."""
    gpn = table.cluster.gpus_per_node
    dense = comm.place_group(cfg.dp * cfg.cp, cfg.tp, gpn)
    expert = comm.place_group(max(1, cfg.dp * cfg.cp // cfg.ep), cfg.tp * cfg.ep, gpn)
    return dense, expert


def _data_parallel_comm(table: CostTable, cfg: ParallelConfig, r: Ranks) -> tuple[float, float]:
    """(link, exposed) time of the end-of-step gradient reduction and parameter gather.

    ZeRO-0: all-reduce of gradients (2Ψ); ZeRO-1/2: reduce-scatter gradients, all-gather updated
    parameters (same 2Ψ, ZeRO §7); ZeRO-3 communicates per layer instead (``costmodel.local``). With
    ``overlap_grad_reduce`` the reduction hides behind the last micro-batch's backward except the last
    bucket; with ``overlap_param_gather`` the gather hides behind the next step's first forward. A
    rank r stages later in the pipeline finishes its backward earlier, which gives it slack.
    """
    if cfg.zero == 3 or cfg.dp * cfg.cp == 1:
        return 0.0, 0.0
    cluster = table.cluster
    dense_g, expert_g = _dp_groups(table, cfg)
    dense, expert = r.params - r.expert_params, r.expert_params
    per_step = 1 if cfg.zero < 2 else cfg.num_microbatches
    reduce = comm.all_reduce if cfg.zero == 0 else comm.reduce_scatter
    red = per_step * (reduce(cluster, dense_g, dense * cfg.grad_reduce_bytes) + reduce(cluster, expert_g, expert * cfg.grad_reduce_bytes))
    gather = 0.0 * red
    if cfg.zero:
        gather = comm.all_gather(cluster, dense_g, dense * cfg.param_bytes) + comm.all_gather(cluster, expert_g, expert * cfg.param_bytes)
    if cfg.overlap_grad_reduce:
        bucket = np.minimum(1.0, GRAD_BUCKET_PARAMS / np.maximum(r.params, 1.0))
        red_exposed = np.maximum(red * bucket, red - r.bwd_s * per_step)
    else:
        red_exposed = red
    gather_exposed = np.maximum(0.0, gather - r.fwd_s) if cfg.overlap_param_gather else gather
    slack = np.arange(cfg.pp) * (r.fwd_s + r.bwd_s) / cfg.vpp
    exposed = float(np.max(red_exposed + gather_exposed - slack))
    return float(np.max(red + gather)), max(0.0, exposed)


def _optimizer_time(table: CostTable, cfg: ParallelConfig, r: Ranks) -> np.ndarray:
    """Adam over the parameters each GPU updates (its shard under ZeRO ≥ 1): memory-bound."""
    shard_dense = cfg.dp * cfg.cp if cfg.zero >= 1 else 1
    shard_expert = max(1, cfg.dp * cfg.cp // cfg.ep) if cfg.zero >= 1 else 1
    local = (r.params - r.expert_params) / shard_dense + r.expert_params / shard_expert
    eff = table.cluster.efficiency
    bandwidth = table.cluster.gpu.hbm_bandwidth_gbps * 1e9 * eff.memory
    return ADAM_BYTES_PER_PARAM * local / bandwidth + 4 * eff.kernel_overhead_us * 1e-6


def _rank_memory(table: CostTable, cfg: ParallelConfig, r: Ranks) -> dict[str, np.ndarray]:
    """Memory of every pipeline rank in GiB: model states (dense and expert parts sharded over their
    groups), activations of the in-flight micro-batches plus the largest transient, buffers."""
    dense_shard = cfg.dp * cfg.cp
    expert_shard = max(1, dense_shard // cfg.ep)
    sizes = (cfg.param_bytes, cfg.grad_bytes, cfg.optimizer_bytes)
    d = model_state_bytes(r.params - r.expert_params, dense_shard, cfg.zero, *sizes)
    e = model_state_bytes(r.expert_params, expert_shard, cfg.zero, *sizes)
    flight = np.array([in_flight_microbatches(cfg.schedule, i, cfg.pp, cfg.vpp, cfg.num_microbatches) for i in range(cfg.pp)])
    acts = flight * r.act_bytes + r.work_bytes
    buffers = _buffer_bytes(cfg, r) + FRAGMENTATION * acts
    return {
        "params": (d[0] + e[0]) / GIB,
        "grads": (d[1] + e[1]) / GIB,
        "optimizer_states": (d[2] + e[2]) / GIB,
        "activations": acts / GIB,
        "buffers": buffers / GIB + table.cluster.runtime_overhead_gib,
    }


def _buffer_bytes(cfg: ParallelConfig, r: Ranks) -> np.ndarray:
    """Communication buffers: pipeline send/receive (2 each way), ZeRO-3's gathered copy of the
    largest unit plus one prefetched (DeepSpeed estimator's 4·Ψ_largest at 2 bytes, doubled), and
    the SP all-gather workspace of one b·s·h activation."""
    p2p = 4 * r.boundary_bytes if cfg.pp > 1 else 0.0 * r.boundary_bytes
    zero3 = 2 * cfg.param_bytes * r.largest_layer_params if cfg.zero == 3 else 0.0
    sp = r.boundary_bytes * cfg.tp if cfg.sp and cfg.tp > 1 else 0.0
    return p2p + zero3 + sp
