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

from costmodel import comm
from costmodel.engines import EngineTerms, engine_terms, grad_bucket_params
from costmodel.offload import activation_offload_time, optimizer_offload_time
from costmodel.optimizer import ADAM_BYTES_PER_PARAM, accumulation_bytes, gradient_pass_bytes
from costmodel.precision import FP8_WEIGHT_COPY_BYTES, fp8_gemm_speedup
from costmodel.local import LocalConfig
from costmodel.memory import GIB, held_loss_bytes, in_flight_microbatches, model_state_bytes, stranded_logit_bytes
from costmodel.pipeline import p2p_exposed, pipeline_time_folded
from costmodel.ranks import Ranks, RankSums, rank_costs
from costmodel.specs import EfficiencySpec, EmbeddingLayer, ParallelConfig
from costmodel.table import CostTable

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
FRAGMENTATION = 0.05
"""Allocator slack on activations (Megatron's estimator multiplies activations by 1.05)."""
FSDP2_STATE_BYTES = (4, 4, 8)
"""Sharded bytes per parameter under FSDP2 mixed precision (torchtitan): the fp32 parameter (the
master copy), its fp32 gradient, Adam's m and v (torch.distributed.fsdp ``MixedPrecisionPolicy``:
bf16 exists only while a unit is gathered)."""
FSDP2_PP_GATHERED_BYTES = 6
"""Bytes per parameter of a pipeline stage FSDP2 keeps unsharded for the whole step under PP: the
gathered bf16 parameters (2) and the unsharded gradients accumulated across micro-batches until the
last one reduce-scatters them, in the fp32 ``reduce_dtype`` (4) [assumption: accumulation in the
reduce dtype]."""
FSDP2_UNIT_BYTES = 10
"""Bytes per parameter of the largest FSDP2 unit while it runs backward: its gathered bf16
parameters and the next unit's, prefetched (2 + 2), its unsharded bf16 gradient (2) and the fp32
copy reduce-scattered with ``reduce_dtype=float32`` (4) (torch.distributed.fsdp ``FSDPParamGroup``)."""


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

    @property
    def rank_memory_breakdown_gib(self) -> list[dict[str, float]]:
        """Memory breakdown of each pipeline rank, GiB."""
        return [rank_memory(self.table, self.config, self.ranks.rank(r), r) for r in range(self.config.pp)]

    def rank_memory_parts_gib(self, r: int) -> tuple[dict[str, float], dict[str, float]]:
        """(allocated tensors by category, GPU-only terms) of pipeline rank ``r``, GiB
        (:func:`rank_allocated_bytes`, :func:`rank_gpu_only_bytes`)."""
        tracked, gpu = _rank_parts(self.table, self.config, self.ranks.rank(r), r)
        return {k: v / GIB for k, v in tracked.items()}, {k: v / GIB for k, v in gpu.items()}

    @property
    def rank_memory_gib(self) -> list[float]:
        """Peak memory of each pipeline rank, GiB."""
        return [sum(parts.values()) for parts in self.rank_memory_breakdown_gib]

    @property
    def fits(self) -> bool:
        return self.peak_memory_gib <= self.capacity_gib

    @property
    def over_by_gib(self) -> float:
        return max(0.0, self.peak_memory_gib - self.capacity_gib)


def _terms(table: CostTable, cfg: ParallelConfig) -> EngineTerms:
    """``costmodel.engines.engine_terms`` of ``cfg``, memoised in the table (it depends on a few fields)."""
    key = ("engine", cfg.engine, cfg.compile, cfg.loss_fusion, cfg.zero, cfg.pp > 1, cfg.tp_async_backward, cfg.grad_accum_fusion)
    hit = table.memo.get(key)
    if hit is None:
        hit = table.memo[key] = engine_terms(cfg)
    return hit


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
    return (recompute, cfg.micro_batch, cfg.seq_len, cfg.tp, cfg.cp, cfg.ep, cfg.sp, cfg.attention, cfg.zero == 3,
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
        capacity_gib=table.cluster.gpu.hbm_gib,
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


def rank_memory(table: CostTable, cfg: ParallelConfig, t: RankSums, rank: int) -> dict[str, float]:
    """Memory of pipeline rank ``rank`` holding ``t`` in GiB, on a GPU: what PyTorch allocates
    (:func:`rank_allocated_bytes`) with the GPU-only terms (:func:`rank_gpu_only_bytes`) in ``buffers``."""
    parts, gpu_only = _rank_parts(table, cfg, t, rank)
    parts["buffers"] += sum(gpu_only.values())
    return {k: v / GIB for k, v in parts.items()}


def _state_bytes(cfg: ParallelConfig, t: RankSums, terms: EngineTerms) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """(dense, expert) (params, grads, optimizer states) bytes, each sharded over its group."""
    dense_shard = cfg.dp * cfg.cp
    sizes = FSDP2_STATE_BYTES if terms.fp32_sharded_params else (cfg.param_bytes, cfg.grad_bytes, cfg.optimizer_bytes)
    zero = 2 if cfg.zero == 1 and terms.zero1_shards_grads else cfg.zero
    if zero == 2 and terms.pp_unsharded_grads:  # whole gradients accumulate across micro-batches
        zero = 1
    d = model_state_bytes(t.params - t.expert_params, dense_shard, zero, *sizes)
    e = model_state_bytes(t.expert_params, max(1, dense_shard // cfg.ep), zero, *sizes)
    return d, e


def _flight(cfg: ParallelConfig, rank: int) -> float:
    flight = in_flight_microbatches(cfg.schedule, rank, cfg.pp, cfg.vpp, cfg.num_microbatches)
    if cfg.offload_activations:  # one micro-batch's stage on the GPU while the rest waits on the host
        flight = min(flight, 1.0)
    return flight


def rank_allocated_bytes(table: CostTable, cfg: ParallelConfig, t: RankSums, rank: int) -> dict[str, float]:
    """Bytes of tensors pipeline rank ``rank`` holds at its peak, what PyTorch's allocator hands out
    and ``torch.distributed._tools``' memory tracker counts: model states (dense and expert parts
    sharded over their groups), activations of the in-flight micro-batches plus the largest
    transient (at the peak phase, :func:`_peak_phase`, where the engine frees gradients every step)
    and, on a GPipe last stage, the other micro-batches' losses (``costmodel.memory.held_loss_bytes``),
    communication buffers (:func:`_buffer_bytes`)."""
    return _rank_parts(table, cfg, t, rank)[0]


def _rank_parts(table: CostTable, cfg: ParallelConfig, t: RankSums, rank: int) -> tuple[dict[str, float], dict[str, float]]:
    """(:func:`rank_allocated_bytes`, :func:`rank_gpu_only_bytes`) of one rank, computed together."""
    terms = _terms(table, cfg)
    d, e = _state_bytes(cfg, t, terms)
    flight = _flight(cfg, rank)
    held_grad, end_work = _tp_embedding_grad_bytes(table, cfg, terms, rank)
    grads = d[1] + e[1] + held_grad
    acts = flight * t.act_bytes + t.work_bytes
    if terms.grads_freed_each_step:
        acts, grads = _peak_phase(cfg, t, flight, grads, end_work)
    tokens = cfg.micro_batch * (table.model.tokens_per_sample or cfg.seq_len) / cfg.cp
    if cfg.schedule == "gpipe":
        acts += held_loss_bytes(table.model, tokens, cfg.tp, cfg.schedule, rank, cfg.pp, flight)
    allocated = {
        "params": d[0] + e[0],
        "grads": grads,
        "optimizer_states": 0.0 if cfg.offload_optimizer else d[2] + e[2],
        "activations": acts,
        "buffers": _buffer_bytes(cfg, t, terms),
    }
    gpu_only = {
        "runtime_overhead": table.cluster.runtime_overhead_gib * GIB,
        "allocator_slack": FRAGMENTATION * acts,
        "allocator_cache": max(0.0, d[1] + e[1] - grads),
        "allocator_loss_block": stranded_logit_bytes(table.model, tokens, cfg.tp, rank, cfg.pp) if terms.loss_strands_logits else 0.0,
    }
    return allocated, gpu_only


def rank_gpu_only_bytes(table: CostTable, cfg: ParallelConfig, t: RankSums, rank: int) -> dict[str, float]:
    """Bytes a GPU run holds beyond the tensors (:func:`rank_allocated_bytes`), which a memory
    tracker never sees:

    - ``runtime_overhead``: the CUDA context, NCCL communicators and their buffers (allocated by
      NCCL outside PyTorch's caching allocator), framework workspaces: the cluster's
      ``runtime_overhead_gib``;
    - ``allocator_slack``: the caching allocator's rounding and fragmentation,
      :data:`FRAGMENTATION` of the activations (Megatron-LM's memory estimator multiplies
      activations by 1.05);
    - ``allocator_cache``: gradients an engine frees at every step's ``zero_grad`` before its peak
      (``EngineTerms.grads_freed_each_step``) stay reserved in the caching allocator's cache (it
      returns no block to the device, and activations larger than a freed gradient block cannot
      reuse it): their bytes count towards the reserved peak though no tensor holds them. Evidence:
      torchtitan's published reserved peaks for Llama 3.1 8B on 8 and 128 GPUs
      (``planner/reference/published_runs.csv``) differ by 15.4 GiB where the model states differ by
      10.5 GiB, and by 14.0 GiB with the sharded gradients [assumption: the freed gradient blocks are
      not reused by the activations].
    - ``allocator_loss_block``: the freed bf16 logits' block an eager loss's fp32 backward buffers
      cannot reuse (``EngineTerms.loss_strands_logits``, ``costmodel.memory.stranded_logit_bytes``).
    """
    return _rank_parts(table, cfg, t, rank)[1]


def _tp_embedding_grad_bytes(table: CostTable, cfg: ParallelConfig, terms: EngineTerms, rank: int) -> tuple[float, float]:
    """(held, transient) bytes of a full-vocabulary embedding gradient on the pipeline rank holding
    the embedding under TP (``EngineTerms.tp_embedding_full_grad``): the bf16 V x h gradient (2 B per
    element) and, where it is reduced at once, its fp32 copy for the ``reduce_dtype`` reduce-scatter
    (4 B), transient at the end of backward; where gradients accumulate across micro-batches
    (``pp_unsharded_grads``) the fp32 accumulator is the whole table, 4 B per element held instead of
    4/t (measured with torch's tracker on Llama 3.1 70B at tp 8: 3.9 GiB accumulator, 2.0 GiB bf16)."""
    if not terms.tp_embedding_full_grad or cfg.tp == 1 or rank != 0:
        return 0.0, 0.0
    table_elems = float(sum(x.vocab_size * x.hidden_size for x in table.model.layers if isinstance(x, EmbeddingLayer)))
    if terms.pp_unsharded_grads:
        return 4 * table_elems * (1 - 1 / cfg.tp), 2 * table_elems
    return 0.0, 6 * table_elems


def _peak_phase(cfg: ParallelConfig, t: RankSums, flight: float, grads: float, end_work: float = 0.0) -> tuple[float, float]:
    """(activations, gradients) bytes at the peak of a rank whose gradients are set to None every
    step (``EngineTerms.grads_freed_each_step``): the larger of two phases.

    A, the start of a backward: the in-flight micro-batches' activations and the loss / recompute
    transient, beside only the gradients earlier micro-batches left (none in a one-micro-batch step
    or in a pipeline rank that holds every micro-batch it runs; all of them otherwise: the runtime
    reduces each micro-batch's gradients into the sharded ones, and a pipeline's steady state runs a
    forward after the first backward). B, the end of a backward: every gradient, with one micro-batch
    fewer in flight. Between them activations are freed layer by layer while the layer's gradients
    appear (reduce-scattered per layer under FSDP / ZeRO 2-3), so the step's peak is the larger end
    (PyTorch's ``torch.distributed._tools`` memory tracker; Rajbhandari et al., SC'20, §5.2: ZeRO-2
    reduces each gradient as it is produced). Transients (:attr:`RankSums.work_bytes`: logits, the
    recomputed block) are counted in both, ``end_work`` (the embedding's last gradient) in B."""
    runs_more = cfg.num_microbatches > (1 if cfg.pp == 1 else flight)
    start = (flight * t.act_bytes + t.work_bytes, grads if runs_more else 0.0)
    end = (max(flight - 1.0 / cfg.vpp, 0.0) * t.act_bytes + max(t.work_bytes, end_work), grads)  # one chunk-micro-batch done
    return start if sum(start) >= sum(end) else end


def _buffer_bytes(cfg: ParallelConfig, t: RankSums, terms: EngineTerms) -> float:
    """Communication buffers: pipeline send/receive (2 each way), ZeRO-3's gathered copy of the
    largest unit plus one prefetched (DeepSpeed estimator's 4·Ψ_largest at 2 bytes, doubled; FSDP2
    adds the unit's unsharded bf16 gradient and its fp32 reduce-scatter copy, :data:`FSDP2_UNIT_BYTES`),
    the SP all-gather workspace of one b·s·h activation, and Transformer Engine's FP8 weight copies
    (``costmodel.precision.FP8_WEIGHT_COPY_BYTES`` per parameter, counted over all the rank's
    parameters: an upper bound, since the embedding and head stay bf16)."""
    p2p = 4 * t.boundary_bytes if cfg.pp > 1 else 0.0
    unit = FSDP2_UNIT_BYTES if terms.fp32_sharded_params else 2 * cfg.param_bytes
    zero3 = unit * t.largest_layer_params if cfg.zero == 3 else 0.0
    if terms.fsdp_keeps_gathered:
        zero3 = FSDP2_PP_GATHERED_BYTES * t.params
    sp = t.boundary_bytes * cfg.tp if cfg.sp and cfg.tp > 1 else 0.0
    fp8 = FP8_WEIGHT_COPY_BYTES * t.params if cfg.precision == "fp8" and terms.fp8_saves_fp8_inputs else 0.0
    return p2p + zero3 + sp + fp8
