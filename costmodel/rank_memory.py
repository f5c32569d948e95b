"""The memory of one pipeline rank in a training step: model states, activations in flight, buffers
and the GPU-only terms torch's tracker cannot see, at the step's peak phase (end of forward or start of
backward). Split from ``costmodel.step``, which sums them per rank; every term names its source here."""

from __future__ import annotations

from costmodel.engines import RUNTIME_MEMORY_ENGINES, EngineTerms, engine_terms
from costmodel.memory import (
    GIB, LOSS_SAVED_BYTES_PER_LOGIT, held_loss_bytes, in_flight_microbatches, interleaved_held_act_bytes, model_state_bytes, stranded_logit_bytes,
)
from costmodel.local import ACT_BYTES
from costmodel.precision import FP8_WEIGHT_COPY_BYTES
from costmodel.rank_phases import backward_start, first_reduce, held_bytes, last_unit_params, peak_phase, zero3_units
from costmodel.rank_units import (  # noqa: F401 (re-exported: the unit's figures)
    FSDP2_LOW_ZERO_UNIT_BYTES, FSDP2_UNIT_BYTES, _end_unit, _keeps_gathered, _layer_unit_bytes, _unit_bytes,
)
from costmodel.ranks import RankSums
from costmodel.specs import EmbeddingLayer, HeadLayer, ParallelConfig
from costmodel.table import CostTable

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
def engine_terms_memo(table: CostTable, cfg: ParallelConfig) -> EngineTerms:
    """``costmodel.engines.engine_terms`` of ``cfg``, memoised in the table (it depends on a few fields)."""
    key = ("engine", cfg.engine, cfg.compile, cfg.loss_fusion, cfg.zero, cfg.pp > 1, cfg.num_microbatches > 1, cfg.tp_async_backward,
           cfg.grad_accum_fusion)
    hit = table.memo.get(key)
    if hit is None:
        hit = table.memo[key] = engine_terms(cfg)
    return hit


def rank_memory(table: CostTable, cfg: ParallelConfig, t: RankSums, rank: int) -> dict[str, float]:
    """Memory of pipeline rank ``rank`` holding ``t`` in GiB, on a GPU: what PyTorch allocates
    (:func:`rank_allocated_bytes`) with the GPU-only terms (:func:`rank_gpu_only_bytes`) in ``buffers``."""
    parts, gpu_only = rank_parts(table, cfg, t, rank)
    parts["buffers"] += sum(gpu_only.values())
    return {k: v / GIB for k, v in parts.items()}


def _state_bytes(cfg: ParallelConfig, t: RankSums, terms: EngineTerms) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """(dense, expert) (params, grads, optimizer states) bytes, each sharded over its group."""
    dense_shard, expert_shard = cfg.dp * cfg.cp, max(1, cfg.dp * cfg.cp // cfg.ep)
    if terms.fsdp2_low_zero:  # ZeRO 1-2 as FSDP2 (planner.runtime.fsdp)
        dense = _fsdp2_low_zero_bytes(cfg, t.params - t.expert_params, dense_shard, terms)
        return dense, _fsdp2_low_zero_bytes(cfg, t.expert_params, expert_shard, terms)
    sizes = FSDP2_STATE_BYTES if terms.fp32_sharded_params else (cfg.param_bytes, cfg.grad_bytes, cfg.optimizer_bytes)
    zero = 2 if cfg.zero == 1 and terms.zero1_shards_grads else cfg.zero
    if zero == 2 and terms.pp_unsharded_grads:  # whole gradients accumulate across micro-batches
        zero = 1
    d = model_state_bytes(t.params - t.expert_params, dense_shard, zero, *sizes)
    e = model_state_bytes(t.expert_params, expert_shard, zero, *sizes)
    return d, e


def _fsdp2_low_zero_bytes(cfg: ParallelConfig, params: float, shard: int, terms: EngineTerms) -> tuple[float, float, float]:
    """(params, grads, optimizer states) bytes of ZeRO 1-2 run as FSDP2 (``EngineTerms.fsdp2_low_zero``):
    the fp32 shards (:data:`FSDP2_STATE_BYTES` over ``shard``) plus the gathered ``param_bytes``
    copy; under PP the gradients accumulate whole in fp32 (``EngineTerms.pp_unsharded_grads``)."""
    p, g, o = model_state_bytes(params, shard, 3, *FSDP2_STATE_BYTES)
    if terms.pp_unsharded_grads:
        g = params * FSDP2_STATE_BYTES[1]
    return p + params * cfg.param_bytes, g, o


def _flight(cfg: ParallelConfig, rank: int) -> float:
    flight = in_flight_microbatches(cfg.schedule, rank, cfg.pp, cfg.vpp, cfg.num_microbatches)
    if cfg.offload_activations:  # one micro-batch's stage on the GPU while the rest waits on the host
        flight = min(flight, 1.0)
    return flight


def _held_act_bytes(cfg: ParallelConfig, t: RankSums, rank: int, flight: float) -> float:
    """Activation bytes of the in-flight micro-batches at the rank's peak: ``flight`` whole stages, or
    under interleaving with chunks of unequal depth the schedule's own largest held set
    (``costmodel.memory.interleaved_held_act_bytes``), with the output each in-flight chunk-micro-batch
    sends on: ``PipelineStage.forward_one_chunk`` keeps it in ``fwd_cache`` until that backward (torch
    2.13 pipelining/stage.py), where no layer of the chunk keeps it (``RankSums.send_bytes``; measured
    with torch's tracker on the differential sweep's embedding-only first stages: the 4 KiB embedding
    output held at the peak, unpriced before); an output its chunk's last layer keeps is counted there
    (``RankSums.kept_send_bytes``)."""
    sent = flight * (t.send_bytes - t.kept_send_bytes) if cfg.engine in RUNTIME_MEMORY_ENGINES else 0.0  # EngineTerms.torch_pipelining
    if cfg.schedule == "interleaved-1f1b" and cfg.vpp > 1 and t.chunk_act_bytes and not cfg.offload_activations:
        return interleaved_held_act_bytes(t.chunk_act_bytes, cfg.pp, rank, cfg.num_microbatches) + sent
    return flight * t.act_bytes + sent


def _p2p_bytes(cfg: ParallelConfig, t: RankSums, terms: EngineTerms) -> float:
    """Pipeline receive buffers: :func:`p2p_buffer_bytes` under torch pipelining
    (``EngineTerms.torch_pipelining``), else send and receive, two each way, of the largest boundary."""
    if terms.torch_pipelining:
        return p2p_buffer_bytes(cfg, t.recv_bytes, t.send_bytes)
    return 4 * t.boundary_bytes if cfg.pp > 1 else 0.0


def p2p_buffer_bytes(cfg: ParallelConfig, recv: float, send: float) -> float:
    """Pipeline receive buffers: ``torch.distributed.pipelining.PipelineStage`` allocates, at the
    first step and for good, one buffer per micro-batch for each chunk's input (all chunks but the
    pipeline's first; the forward takes it as its leaf input) and one per micro-batch for each
    chunk's output gradient (all but the last): torch 2.13 pipelining/stage.py
    ``_setup_forward_recv_info`` and ``_create_grad_recv_info``, ``n_microbatches`` each. ``recv``
    and ``send``: the rank's received and sent bytes per micro-batch over its chunks
    (``RankSums.recv_bytes``, ``send_bytes``). Measured with torch's tracker on the differential
    sweep's GPT-2 (dp 2, pp 4, ZB-H1, one micro-batch of 4): the first stage holds one 4 KiB gradient
    buffer, where 4 boundaries (16 KiB) were priced before. A chunk whose first op saves its input in
    the dtype it arrives in (a LayerNorm, a checkpointed block) keeps the buffer as an activation too,
    which the activations count again (but a traced layer's whose producer saves it: ``GenericLayer.input_saved_bytes_per_token``):
    an over-estimate of one boundary per in-flight micro-batch; RMSNorm (eager) saves an fp32 copy."""
    return cfg.num_microbatches * (recv + send) if cfg.pp > 1 else 0.0


def forward_end_activation_bytes(cfg: ParallelConfig, t: RankSums, rank: int) -> float:
    """Activation bytes the rank holds at the end of its forwards (phase A of :func:`peak_phase`):
    the in-flight micro-batches and the largest transient. This grows with the micro-batch at any
    micro-batch count, where the peak's own activations may not (the exception named there)."""
    return _held_act_bytes(cfg, t, rank, _flight(cfg, rank)) + t.work_bytes


def largest_activation_bytes(table: CostTable, cfg: ParallelConfig, t: RankSums, rank: int) -> float:
    """The most activation bytes the rank holds at any moment of the step: the end of its forwards
    (:func:`forward_end_activation_bytes`, with a GPipe last stage's held losses), or the peak's own
    activations where those are larger. Unlike the peak's activations (which can be the end of a
    backward, most of them freed: :func:`peak_phase`), this grows with the micro-batch (issue 35)."""
    at_peak = rank_parts(table, cfg, t, rank)[0]["activations"]
    return max(at_peak, forward_end_activation_bytes(cfg, t, rank) + _gpipe_loss_bytes(table, cfg, rank, _flight(cfg, rank)))


def _kept_logit_bytes(table: CostTable, cfg: ParallelConfig, terms: EngineTerms, rank: int) -> float:
    """The bf16 logits (2 B per logit, ``tokens · V / t``) the last pipeline stage holds through its
    whole backward (``EngineTerms.pp_keeps_logits``): ``PipelineStage.backward_one_chunk`` pops the
    stage output from ``fwd_cache`` into a local that lives until the backward returns, also on the
    last stage, whose backward starts from the loss (torch 2.13 pipelining/stage.py). Measured with
    torch's tracker on the differential sweep's GPT-2 (pp 4, ZeRO 1, full recompute, one micro-batch,
    case d0030): the last stage peaks in its block's recomputed GELU backward beside the 32 KiB of
    logits and the head's reduced gradients, 3.0 % under without them."""
    if not terms.pp_keeps_logits or rank != cfg.pp - 1:
        return 0.0
    tokens = cfg.micro_batch * (table.model.tokens_per_sample or cfg.seq_len) / cfg.cp
    vocab = sum(x.vocab_size for x in table.model.layers if isinstance(x, HeadLayer))
    return ACT_BYTES * tokens * vocab / cfg.tp


def _gpipe_loss_bytes(table: CostTable, cfg: ParallelConfig, rank: int, flight: float) -> float:
    """The other micro-batches' losses a GPipe last stage holds (``costmodel.memory.held_loss_bytes``)."""
    if cfg.schedule != "gpipe":
        return 0.0
    tokens = cfg.micro_batch * (table.model.tokens_per_sample or cfg.seq_len) / cfg.cp
    per_logit = LOSS_SAVED_BYTES_PER_LOGIT + (ACT_BYTES if engine_terms_memo(table, cfg).pp_keeps_logits else 0)
    return held_loss_bytes(table.model, tokens, cfg.tp, cfg.schedule, rank, cfg.pp, flight, per_logit)


def rank_allocated_bytes(table: CostTable, cfg: ParallelConfig, t: RankSums, rank: int) -> dict[str, float]:
    """Bytes of tensors pipeline rank ``rank`` holds at its peak, what PyTorch's allocator hands out
    and ``torch.distributed._tools``' memory tracker counts: model states (dense and expert parts
    sharded over their groups), activations of the in-flight micro-batches plus the largest
    transient (at the peak phase, :func:`peak_phase`, where the engine frees gradients every step)
    and, on a GPipe last stage, the other micro-batches' losses (``costmodel.memory.held_loss_bytes``),
    communication buffers (:func:`_buffer_bytes`, :func:`p2p_buffer_bytes`)."""
    return rank_parts(table, cfg, t, rank)[0]


def rank_parts(table: CostTable, cfg: ParallelConfig, t: RankSums, rank: int) -> tuple[dict[str, float], dict[str, float]]:
    """(:func:`rank_allocated_bytes`, :func:`rank_gpu_only_bytes`) of one rank, computed together."""
    terms = engine_terms_memo(table, cfg)
    d, e = _state_bytes(cfg, t, terms)
    flight = _flight(cfg, rank)
    held_grad, end_work = _tp_embedding_grad_bytes(table, cfg, terms, rank)
    grads = d[1] + e[1] + held_grad
    held = _held_act_bytes(cfg, t, rank, flight)
    unit = _unit_bytes(cfg, t, terms)
    parts = _layer_unit_bytes(cfg, terms, unit) if terms.engine == "native" else None  # the layer-by-layer moments' unit parts
    unit, end_unit = zero3_units(t, parts, unit, FSDP2_LOW_ZERO_UNIT_BYTES) if parts is not None and cfg.zero == 3 else (unit, unit)
    apart = terms.unit_apart_from_loss and (cfg.pp == 1 or cfg.num_microbatches == 1)  # resharded after every backward
    loss = _gpipe_loss_bytes(table, cfg, rank, flight)
    phase = backward_start(t, held, grads, unit if apart else None, 0.0 if terms.unit_apart_from_loss else unit)
    phase = phase._replace(acts=phase.acts + loss)
    if terms.grads_freed_each_step:
        end = _backward_end_bytes(cfg, t, terms, d[1] + e[1])
        curve = (parts, end_unit) if parts is not None else None
        phase = peak_phase(cfg, t, flight, held, grads, end_work, end, _end_unit(cfg, terms, unit), apart,
                           not _keeps_gathered(cfg, terms), curve, _kept_logit_bytes(table, cfg, terms, rank),
                           _nosync_bytes(cfg, t, terms), (loss, _gpipe_loss_bytes(table, cfg, rank, flight - 1)))
        first = first_reduce(cfg, t, terms, held)
        if first is not None and held_bytes(first) > held_bytes(phase):
            phase = first
    acts = phase.acts
    tokens = cfg.micro_batch * (table.model.tokens_per_sample or cfg.seq_len) / cfg.cp
    allocated = {
        "params": d[0] + e[0] - phase.freed_params,
        "grads": phase.grads,
        "optimizer_states": 0.0 if cfg.offload_optimizer else d[2] + e[2],
        "activations": acts,
        "buffers": _held_buffer_bytes(cfg, t, terms) + phase.unit + phase.gathered + _p2p_bytes(cfg, t, terms) + phase.reduce_outputs,
    }
    gpu_only = {
        "runtime_overhead": table.cluster.runtime_overhead_gib * GIB,
        "allocator_slack": FRAGMENTATION * (acts + phase.embedding_grad),
        "allocator_cache": max(0.0, d[1] + e[1] - phase.grads) + phase.freed_params,
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
      not reused by the activations]; so do the gathered bf16 parameters freed before a peak at the
      end of a backward (:func:`_backward_end_bytes`), which the forward held all at once.
    - ``allocator_loss_block``: the freed bf16 logits' block an eager loss's fp32 backward buffers
      cannot reuse (``EngineTerms.loss_strands_logits``, ``costmodel.memory.stranded_logit_bytes``)."""
    return rank_parts(table, cfg, t, rank)[1]


def _tp_embedding_grad_bytes(table: CostTable, cfg: ParallelConfig, terms: EngineTerms, rank: int) -> tuple[float, float]:
    """(held, transient) bytes of a full-vocabulary embedding gradient on the pipeline rank holding
    the embedding under TP (``EngineTerms.tp_embedding_full_grad``): the bf16 V x h gradient (2 B per
    element), transient at the end of backward. Reduced at once, FSDP2 redistributes it to the
    parameter's V/t rows before ``foreach_reduce`` copies those into the fp32 ``reduce_dtype`` input
    (torch 2.13 ``FSDPParam._get_grad_inner_tensor``): the unit's own input (``_unit_bytes``), no
    full-table copy (torch's tracker on the differential sweep's GPT-2, tp 2, ZeRO 1, one micro-batch,
    case d0219 at draw seed 1: the 8 KiB bf16 gradient at the peak, then the token table's 8 KiB fp32
    input of its 2,048 local elements; +32.1 % priced with a 16 KiB full copy). Accumulated across
    micro-batches (``pp_unsharded_grads``), ``FSDPParam.to_accumulated_grad_if_needed`` casts it before
    any redistribution: the fp32 accumulator is the whole table, 4 B per element held instead of 4/t
    (measured with torch's tracker on Llama 3.1 70B at tp 8: 3.9 GiB accumulator, 2.0 GiB bf16)."""
    if not terms.tp_embedding_full_grad or cfg.tp == 1 or rank != 0:
        return 0.0, 0.0
    table_elems = float(sum(x.vocab_size * x.hidden_size for x in table.model.layers if isinstance(x, EmbeddingLayer)))
    if terms.pp_unsharded_grads:
        return 4 * table_elems * (1 - 1 / cfg.tp), 2 * table_elems
    return 0.0, 2 * table_elems


def _backward_end_bytes(cfg: ParallelConfig, t: RankSums, terms: EngineTerms, sharded_grads: float) -> tuple[float, float, float, float]:
    """(retained, freed, retained and freed per parameter back-propagated) bytes of a backward where FSDP2 runs
    HSDP without pipelining (``EngineTerms.hsdp_backward_end``), beside the gradients and out of the
    parameters:

    - retained: each unit's fp32 reduce output, kept until the backward ends when it is added into
      gradients an earlier micro-batch left (none with one micro-batch), as many bytes as the sharded
      gradients but the running unit's (priced as the largest layer, whose transient the phase
      holds). Measured with torch's tracker on the sweep's Mixtral (tp 2, ZeRO 3, 8 micro-batches
      of 1): four 102.75 KiB fp32 reduce outputs, one per block, at the first block's backward;
    - freed: under ZeRO 0-2, the gathered bf16 parameters of every unit but the one back-propagated
      last (``costmodel.rank_phases.last_unit_params``), which ``post_backward`` reshards (``reshard_after_backward``
      is True by default: torch 2.13 ``FSDPParamGroup.post_backward`` calls ``self.reshard()``),
      less that unit's gathered and prefetched parameters and its bf16 gradient
      (:data:`FSDP2_UNIT_BYTES` but the fp32 reduce-scatter input, the unit's buffer under ZeRO 0-2,
      :func:`_unit_bytes`; measured with torch's tracker on the sweep's custom model, tp 4, ZeRO 0,
      8 micro-batches, d0001: 2.0 KiB of gathered parameters, the embedding's, at the end);
    - per parameter back-propagated, at each moment of the layer-by-layer end
      (``costmodel.rank_phases.layer_by_layer_end``): the reduce output of every unit done (measured
      on the sweep's Llama, one GPU, ZeRO 2, two micro-batches, d0161: 124.9 KiB of fp32 reduce
      outputs, 4 B times the 31,968 parameters done, inside the last block's second backward) and
      the ``param_bytes`` of its gathered parameters, freed with one micro-batch as with several
      (the sweep's custom model at dp 4, ZeRO 0, one micro-batch, d0171: 24.7 KiB of gathered bf16
      parameters of 82.9 at the peak, inside the first block's backward; +10.2 % all priced held).

    Under pipelining the runtime reduces and reshards in a stage's last backward only (its memory
    check as ``PipelineStage`` sets FSDP2: ``planner.runtime.memcheck.step._sync``), so with one
    micro-batch, its only backward, the same parameters are freed (one chunk a rank) (measured on the
    sweep's Mixtral, pp 2, dp 2, ZeRO 2, d0193: 163.1 of the last stage's 225.6 KiB of bf16
    parameters gathered at its peak, inside its second block's backward; +12.4 % all priced held)."""
    if not (terms.hsdp_backward_end or (terms.engine == "native" and cfg.num_microbatches == 1 and cfg.vpp == 1)) or not t.params:
        return 0.0, 0.0, 0.0, 0.0
    own = sharded_grads * t.largest_layer_params / t.params  # the running unit's: not yet reduced
    retained, rate = (sharded_grads - own, sharded_grads / t.params) if cfg.num_microbatches > 1 else (0.0, 0.0)
    if cfg.zero == 3:
        return retained, 0.0, rate, 0.0
    kept = FSDP2_UNIT_BYTES - FSDP2_LOW_ZERO_UNIT_BYTES  # the reduce-scatter input is the unit's buffer (_unit_bytes)
    return retained, max(0.0, t.params * cfg.param_bytes - kept * last_unit_params(t)), rate, float(cfg.param_bytes)


def _nosync_bytes(cfg: ParallelConfig, t: RankSums, terms: EngineTerms) -> tuple[float, float] | None:
    """Where the native runtime's no-sync backwards keep chunks gathered (:func:`_keeps_gathered`
    without ``EngineTerms.fsdp_keeps_gathered``, whose stage stays gathered all step): the bytes per
    parameter of a gathered chunk (:data:`FSDP2_PP_GATHERED_BYTES`) and those of the largest unit's
    bf16 parameters (its gathered copy, the next one's prefetched and its bf16 gradient are each as
    large: :data:`FSDP2_UNIT_BYTES`' parts), which
    ``costmodel.rank_phases.peak_phase`` prices by the chunks gathered at its phases
    (``costmodel.rank_phases.nosync_chunks``: the reshard is off only from a chunk's first
    backward to its last, ``reshard_after_forward=True`` frees the units after each forward); None
    elsewhere."""
    if terms.fsdp_keeps_gathered or not _keeps_gathered(cfg, terms):
        return None
    return float(FSDP2_PP_GATHERED_BYTES), float(cfg.param_bytes * t.largest_layer_params)


def _buffer_bytes(cfg: ParallelConfig, t: RankSums, terms: EngineTerms) -> float:
    """Communication buffers (the pipeline's receive buffers apart, :func:`p2p_buffer_bytes`): the
    largest sharded unit's working set (:func:`_unit_bytes`) beside the buffers held all step
    (:func:`_held_buffer_bytes`). A rank's peak phase may hold the unit or not
    (``costmodel.rank_phases.Phase.unit``); this prices it held, as the search's budgets do."""
    return _held_buffer_bytes(cfg, t, terms) + _unit_bytes(cfg, t, terms)


def _held_buffer_bytes(cfg: ParallelConfig, t: RankSums, terms: EngineTerms) -> float:
    """Buffers held for the whole step: the stage FSDP2 keeps gathered all step
    (``EngineTerms.fsdp_keeps_gathered``, :data:`FSDP2_PP_GATHERED_BYTES`; the native runtime's
    no-sync chunks are priced per phase instead, :func:`_nosync_bytes`), the SP all-gather workspace of one b·s·h activation, and
    Transformer Engine's FP8 weight copies (``costmodel.precision.FP8_WEIGHT_COPY_BYTES`` per
    parameter, counted over all the rank's parameters: an upper bound, since the embedding and head
    stay bf16). ZeRO-3's gathered unit (DeepSpeed estimator's 4·Ψ_largest at 2 bytes, doubled; FSDP2
    :data:`FSDP2_UNIT_BYTES`, under ZeRO 1-2 without pipelining the fp32 reduce-scatter input alone,
    :data:`FSDP2_LOW_ZERO_UNIT_BYTES`) is :func:`_unit_bytes`."""
    gathered = FSDP2_PP_GATHERED_BYTES * t.params if terms.fsdp_keeps_gathered else 0.0  # else per phase: _nosync_bytes
    sp = t.boundary_bytes * cfg.tp if cfg.sp and cfg.tp > 1 else 0.0
    fp8 = FP8_WEIGHT_COPY_BYTES * t.params if cfg.precision == "fp8" and terms.fp8_saves_fp8_inputs else 0.0
    return gathered + sp + fp8
