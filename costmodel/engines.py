"""What each training engine actually does, as named terms the cost model reads.

The same parallel configuration runs differently in Megatron-LM / NeMo, torchtitan and DeepSpeed:
which kernels are fused, what the loss costs and keeps in memory, what selective recomputation
recomputes, which communication overlaps, what the optimizer keeps, and how much host work a step
and a micro-batch carry. :func:`engine_terms` turns ``ParallelConfig.engine`` (and the knobs that
override the engine's defaults) into one :class:`EngineTerms` record; every field names its source.
``native`` is meshplan's own runtime (``planner.apply``: eager PyTorch, FSDP2,
``torch.distributed.pipelining``, ``F.cross_entropy`` on fp32 logits), whose memory is torchtitan's:
every memory term below follows torchtitan's value for it (:data:`RUNTIME_MEMORY_ENGINES`), so that
a native plan's peak is what ``meshplan check-memory`` measures of the runtime.

The native engine's terms are how ``planner.apply`` runs, time included (the estimate follows the
runtime, not the other way round): no ``torch.compile`` and no hand-fused kernels, so elementwise ops
run op by op (unfused RMSNorm, SwiGLU, rotary embeddings, residual adds: ``fused=False`` unless a
plan sets ``compile``), the loss is eager ``F.cross_entropy`` on fp32 logits
(:data:`TORCH_CE_BYTES`, whatever ``loss_fusion`` says), attention is PyTorch SDPA's flash backend
(FlashAttention-2), DTensor's tensor-parallel collectives are synchronous, and FSDP2 adds each
micro-batch's gradients in a kernel of its own. Only the pipeline's send / receive overlap stays
(``torch.distributed.pipelining`` posts them asynchronously, ``_batch_p2p``).
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.specs import ParallelConfig

MEGATRON_CE_BYTES = (38.0, 14.0, 6, 2)
"""Megatron's unfused vocab-parallel cross-entropy, HBM bytes per logit forward and backward and
its kernels (megatron/core/tensor_parallel/cross_entropy.py, op by op: ``.float()`` 2 + 4, ``max``
4, in-place ``-= max`` 8, ``exp`` 8, ``sum`` 4, ``div_`` 8; backward ``mul_`` 8, cast to bf16 6)."""
FUSED_CE_BYTES = (20.0, 6.0, 3, 1)
"""Megatron's fused cross-entropy (``--cross-entropy-loss-fusion``,
megatron/core/fusions/fused_cross_entropy.py, three jit-fused kernels), bytes per logit: the max
reads the bf16 logits (2); the predicted-logit kernel reads them again and writes fp32 ``exp`` (2 +
4); the loss kernel reads ``exp`` for the sum (4) and divides it in place into the softmax kept for
backward (4 + 4). Backward reads the softmax and writes the bf16 gradient (4 + 2). [derived, op by op]"""
TORCH_CE_BYTES = (18.0, 26.0, 3, 4)
"""torchtitan's loss, ``F.cross_entropy(pred.flatten(0, 1).float(), labels)`` in eager PyTorch
(torchtitan/components/loss.py): ``.float()`` reads 2 and writes 4 bytes per logit, ``log_softmax``
reads its input twice and writes fp32 (12); backward: ``nll_loss_backward`` zero-fills and scatters an
fp32 gradient (4), ``log_softmax_backward`` reads it and the saved output and writes fp32 (12),
the cast back to bf16 reads 4 and writes 2 (6), and the zero fill's read-modify of the gradient (4).
[derived, op by op]"""
MEGATRON_LOGIT_WORK = 6.0
"""Transient bytes per logit on the last stage in Megatron: the fp32 logits of the vocab-parallel
cross-entropy (4, Megatron ``compute_activation_memory``: 4·s·b·V/t) and the bf16 logits (2)."""
TORCH_LOGIT_WORK = 12.0
"""Transient bytes per logit at torchtitan's loss, at the start of backward when all activations are
still held: the saved fp32 ``log_softmax`` output (4), the fp32 gradient of ``nll_loss`` (4) and
that of ``log_softmax``'s input (4); the bf16 logits were dropped after the loss (``del pred``,
torchtitan/train.py)."""
TORCH_LOSS_PARALLEL_LOGIT_WORK = 16.0
"""The same under TP with ``loss_parallel`` (vocabulary-parallel cross-entropy on DTensor shards):
its fused backward ``(zeros_like(x) scattered + exp(x)) * grad`` (``_nll_loss_and_log_softmax_backward``,
torch/distributed/tensor/parallel/loss.py) holds, beside the saved fp32 ``log_softmax`` output (4),
the scattered fp32 target gradient (4), ``exp(x)`` (4) and their sum (4); measured with torch's
memory tracker on Llama 3.1 8B at tp 4 (16 B per local logit at the start of backward)."""
DEEPSPEED_PIPE_INSTRUCTION_S = 0.5e-3
"""Host time of one DeepSpeed pipeline-engine instruction (``deepspeed/runtime/pipe/engine.py``
executes ``LoadMicroBatch``, ``ForwardPass``, ``BackwardPass``, ``SendActivation``, ``RecvGrad``, ...
as Python calls with blocking p2p between them): about 0.5 ms each, and a micro-batch has six
[assumption: Python-level instruction dispatch with a device synchronisation per blocking p2p]."""
TORCHTITAN_SAC_SAVED_MM = 2
"""torchtitan's op-level selective checkpointing saves the output of every other matmul and
recomputes the rest (``_custom_policy`` in torchtitan/models/llama/parallelize_llama.py: an
``aten.mm`` is saved unless its count in the block is even)."""


RUNTIME_MEMORY_ENGINES = ("torchtitan", "native")
"""Engines whose memory is eager PyTorch with FSDP2 and torch pipelining: torchtitan, and meshplan's
own runtime (``planner.runtime``: the same stack, measured by ``meshplan check-memory``)."""


@dataclass(frozen=True)
class EngineTerms:
    """One engine's behaviour, as the cost model reads it."""

    engine: str
    fused: bool
    """Elementwise ops fused (compile / hand-fused kernels) or op by op (eager)."""
    ce_fwd_bytes: float
    ce_bwd_bytes: float
    ce_fwd_kernels: int
    ce_bwd_kernels: int
    logit_work_bytes: float
    """Transient bytes per logit at the loss."""
    logit_work_bytes_tp: float
    """Transient bytes per local logit at the vocabulary-parallel loss (tp > 1)."""
    op_level_selective: bool
    """Selective recomputation recomputes every other matmul and every elementwise op (torchtitan),
    not only the attention core (Megatron)."""
    fp8_saves_fp8_inputs: bool
    """FP8 GEMMs keep their inputs in FP8 for backward (Transformer Engine) rather than the bf16
    inputs, recast in backward (torchao Float8Linear)."""
    fp8_dynamic_scaling: bool
    """FP8 scales from the current tensor's amax (an extra read: torchao tensorwise) rather than an
    amax history (Transformer Engine delayed scaling, folded into the cast)."""
    p2p_overlapped: bool
    """Pipeline send/receive overlaps compute in steady state (Megatron with interleaving)."""
    dp_after_flush: bool
    """With pipelining, gradients are reduced only after the pipeline flush, not overlapped with the
    last backward (DeepSpeed ``PipelineEngine._exec_reduce_grads``; Megatron's local DDP)."""
    microbatch_host_s: float
    """Host time per micro-batch the GPU waits on (DeepSpeed pipeline-engine instructions)."""
    fp32_sharded_params: bool
    """Sharded parameters are the fp32 master copy (FSDP2 mixed precision: 4 B params, 4 B grads,
    8 B Adam states per parameter, bf16 copies only while gathered)."""
    cp_all_gather: bool = False
    """Context parallelism all-gathers K/V (torchtitan's default ``allgather`` rotation, and the native
    runtime's variants, ``planner.runtime.context_parallel``) instead of Megatron's overlapped p2p ring."""
    sdpa_fa2: bool = False
    """Attention runs PyTorch SDPA's flash backend, FlashAttention-2 (torchtitan), rather than the
    GPU's fastest fused kernel (Transformer Engine's cuDNN attention in Megatron-LM / NeMo)."""
    tp_async_backward: bool = False
    """The column-parallel linears' backward collectives run asynchronously behind their GEMMs
    (megatron/core/tensor_parallel/layers.py ``LinearWithGradAccumulationAndAsyncCommunication``;
    ``costmodel.layer_transformer.tp_comm``)."""
    grads_freed_each_step: bool = False
    """Gradients exist only from each step's backward on: the step ends with ``zero_grad`` setting
    them to None (torchtitan/train.py ``optimizers.zero_grad()``, PyTorch's default
    ``set_to_none=True``), so the peak is the larger of two phases (``costmodel.step``). Megatron-LM
    keeps a persistent main-gradient buffer (megatron/core/distributed/param_and_grad_buffer.py) and
    DeepSpeed its flat gradient partitions, held beside the activations the whole step."""
    hsdp_backward_end: bool = False
    """At the end of a backward without pipelining, FSDP2 on the runtime's 2-D (replicate, shard) mesh
    (``planner.runtime.mesh.PlanMesh.dp_mesh``: HSDP even with one replica) has freed every unit's
    gathered bf16 parameters but the one still running (``FSDPParamGroup.post_backward`` reshards
    after backward), and keeps each unit's fp32 reduce output, which a micro-batch after the first
    adds into the sharded gradients, until the backward ends (``FSDPParamGroup._all_reduce_state``,
    cleared in ``finalize_backward``; torch 2.13 ``_fsdp_param_group.py`` / ``foreach_reduce``):
    ``costmodel.rank_phases.peak_phase``."""
    zero1_shards_grads: bool = False
    """ZeRO 1 runs as ZeRO 2: FSDP2 has no optimizer-only sharding, it reduce-scatters gradients into
    shards whenever it shards the optimizer states (torch.distributed.fsdp ``fully_shard`` with
    ``reshard_after_forward=False``; torchtitan, and ``planner.runtime.fsdp``)."""
    pp_unsharded_grads: bool = False
    """Under pipelining gradients accumulate unsharded across a step's micro-batches and are
    reduce-scattered once, after the last (FSDP2 ``set_requires_gradient_sync(False)`` until the last
    backward: ``PipelineStage.backward_maybe_with_nosync``, torch/distributed/pipelining/stage.py;
    torchtitan), so ZeRO 1 and 2 hold whole gradients in the reduce dtype. With one micro-batch the
    only backward is the last: it reduces unit by unit as without pipelining (measured with torch's
    tracker on the differential sweep's CNN at pp 2, dp 4, ZeRO 1, one micro-batch: 4.8 KiB of
    gradients at the peak where 33.2 KiB of whole fp32 gradients were priced)."""
    tp_embedding_full_grad: bool = False
    """Under TP the vocabulary-parallel embedding's weight gradient is computed at the full vocabulary
    on every TP rank: DTensor's embedding rule (``RowwiseParallel`` on the table, masked ids,
    torch/distributed/tensor/_ops/_embedding_ops.py) gives a ``Partial`` gradient whose local tensor
    is the whole V x h table, reduced to the rank's rows only afterwards (torchtitan, the runtime);
    Megatron-LM's ``VocabParallelEmbedding`` writes only its own rows."""
    sp_saves_gathered_inputs: bool = False
    """Under sequence parallelism the column-parallel projections keep their all-gathered input for
    backward (DTensor ``ColwiseParallel`` after ``SequenceParallel`` norms: autograd saves the
    gathered ``mm`` input, torchtitan's eager TP), where Megatron-LM keeps the sequence shard and
    all-gathers it again in backward (Korthikanti et al. 2022 §4.2.2)."""
    sac_caches_unread_outputs: bool = False
    """Eager op-level selective checkpointing keeps every saved op's output until the recomputation
    replays it, also outputs backward never reads: ``_CachingTorchDispatchMode`` (torch/utils/
    checkpoint.py) stores the outputs of every ``MUST_SAVE`` op, so the block's output projections
    (``wo`` / ``w2``, whose outputs only feed the residual add) stay cached when the every-other-matmul
    rule saves them. Under torch.compile AOTAutograd's min-cut partitioner
    (torch/_functorch/partitioners.py ``min_cut_rematerialization_partition``) ``MUST_SAVE`` only bans
    recomputation: a node is saved only where the backward graph reads it
    (``costmodel.activations.block_activation_bytes``)."""
    loss_strands_logits: bool = False
    """The loss runs eagerly on an fp32 copy of the bf16 logits and its backward allocates fp32
    buffers twice the bf16 logits' size, so the caching allocator cannot reuse the freed bf16 logits'
    block for them and it stays reserved at the loss's peak (``costmodel.memory.stranded_logit_bytes``)."""
    grad_accum_fused: bool = True
    """Each micro-batch's weight gradients are added into the accumulated ones inside the
    weight-gradient GEMM (Megatron-LM ``--gradient-accumulation-fusion``, default on:
    ``fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32`` writes ``main_grad`` with beta = 1,
    megatron/core/tensor_parallel/layers.py), so accumulating costs no pass of its own. Otherwise a
    memory-bound add per micro-batch after the first (``costmodel.optimizer.accumulation_bytes``):
    autograd's ``AccumulateGrad`` (torchtitan, DeepSpeed's pipeline engine), FSDP2's and ZeRO 2-3's
    ``+=`` into the gradient shard, Megatron-LM's ``main_grad.add_(grad)`` hook before the fusion."""
    eager_activations: bool = False
    """Blocks store what eager PyTorch's ops save (``costmodel.memory.eager_block_extra_bytes``):
    uncompiled engines, and the native runtime, which runs op by op whatever its time terms assume."""
    fsdp2_low_zero: bool = False
    """ZeRO 1 and 2 run as FSDP2 with ``reshard_after_forward=False`` (``planner.runtime.fsdp``,
    torchtitan): fp32 shards of the parameters, gradients and Adam states (4, 4 and 8 B per parameter
    over the data-parallel group) and the bf16 parameters gathered from the first forward to the
    gradient reduction (``param_bytes``, whole), as ``meshplan check-memory`` counts them
    (``costmodel.rank_memory._state_bytes``); the totals are ZeRO 2's."""
    unties_tied_head: bool = False
    """A head tied to the token table holds its own copy of the table under TP or PP
    (``planner.runtime.tied.untie``, called by ``planner.runtime.apply`` whenever tp > 1 or pp > 1, as
    Megatron-LM keeps the word embeddings on the last stage): V x h / t parameters with their
    gradients and optimizer states. ``pipelined`` says whether pp > 1."""
    pipelined: bool = False
    """The configuration has pp > 1 (for :attr:`unties_tied_head`)."""
    replicates_conv1d_blocks: bool = False
    """A block whose projections are transformers' ``Conv1D`` (``TransformerLayer.conv1d``: GPT-2)
    runs whole on every TP rank: the native runtime's TP plan splits ``nn.Linear`` projections only
    (``planner.runtime.tensor_parallel.block_roles``; DTensor's ``ColwiseParallel`` /
    ``RowwiseParallel`` accept ``nn.Linear`` and ``nn.Embedding``), so such a block is replicated over
    tp, gathered around under SP (``_gather_around``): whole parameters and the whole sequence's
    activations on each TP rank. Measured with check-memory on GPT-2 medium (24 blocks, h 1024,
    vocab 50,304) at tp 2, ZeRO 2, micro-batch 16 x 2,048: 59.1 GiB against 36.5 GiB priced split."""
    replicates_experts_over_tp: bool = False
    """A mixture-of-experts block's experts run whole on every TP rank: transformers' fused experts
    (``MixtralExperts`` and kin, ``planner.runtime.expert_parallel.EXPERT_TENSORS``) are 3-D
    ``nn.Parameter`` tensors, not ``nn.Linear``, so the native runtime's TP plan leaves them, with
    their router, unsplit (``planner.runtime.tensor_parallel._moe_modules``: the MoE module takes the
    gathered sequence under SP and keeps its own chunk of the output); only EP divides them. Their
    parameters, gradients and optimizer states are E / ep experts on each TP rank, and their
    activations the whole micro-batch's. Measured with check-memory on the differential sweep's
    Mixtral (4 blocks, h 32, 4 experts of f 64) at tp 2: 640.7 KiB of parameters against 352.7 KiB
    priced split over tp, the difference being half the experts at 6 B per parameter."""
    unit_apart_from_loss: bool = False
    """The largest sharded unit's backward working set (gathered parameters, prefetch, fp32
    reduce-scatter input) and the loss's transient are never held at once: the loss's backward runs
    first, before any block's parameters are gathered again (FSDP2 units per block:
    ``costmodel.rank_phases.backward_start``)."""
    nosync_keeps_gathered: bool = False
    """FSDP2 ZeRO 3 under pipelining in the native runtime: the backwards before each stage's last
    micro-batch run without gradient sync and without resharding (``torch.distributed.pipelining``
    ``backward_maybe_with_nosync``), so from the second micro-batch on the stage's units stay gathered
    beside their unsharded fp32 gradients, as under :attr:`fsdp_keeps_gathered`, for memory only
    (``costmodel.rank_units._unit_bytes``)."""
    torch_pipelining: bool = False
    """Pipelining runs as ``torch.distributed.pipelining`` (torchtitan, the native runtime): receive
    buffers are allocated once per micro-batch and chunk (``costmodel.rank_memory.p2p_buffer_bytes``)
    and each stage output stays in ``fwd_cache`` until its backward; Megatron-LM and DeepSpeed
    receive into a fresh tensor per exchange (priced as two boundaries each way)."""
    pp_keeps_logits: bool = False
    """Under pipelining the last stage's bf16 logits stay referenced from its forward until its
    backward has run: ``PipelineStage.forward_one_chunk`` keeps every stage's output in ``fwd_cache``
    for the backward, which pops it only then (torch 2.13 pipelining/stage.py), so the loss's
    transient and a GPipe stage's held losses include them (2 B per logit; torchtitan's ``del pred``
    before backward applies without pipelining only)."""
    fsdp_keeps_gathered: bool = False
    """FSDP2 under pipelining keeps each stage's parameters gathered for the whole step and reduces
    gradients once, after the last micro-batch (torchtitan: ``reshard_after_forward=False`` with PP,
    ``set_requires_gradient_sync`` only on the last backward)."""


def engine_terms(cfg: ParallelConfig) -> EngineTerms:
    """The behaviour of ``cfg.engine`` with ``cfg``'s knobs (compile, loss fusion) applied."""
    engine = cfg.engine
    titan = engine == "torchtitan"
    native = engine == "native"
    eager_memory = engine in RUNTIME_MEMORY_ENGINES
    fused = cfg.compile if cfg.compile is not None else not eager_memory
    loss_fused = bool(cfg.loss_fusion) and engine == "megatron"
    ce = TORCH_CE_BYTES if eager_memory else FUSED_CE_BYTES if loss_fused else MEGATRON_CE_BYTES
    pipe_host = 6 * DEEPSPEED_PIPE_INSTRUCTION_S if engine == "deepspeed" and cfg.pp > 1 else 0.0
    return EngineTerms(
        engine=engine,
        fused=fused,
        ce_fwd_bytes=ce[0],
        ce_bwd_bytes=ce[1],
        ce_fwd_kernels=ce[2],
        ce_bwd_kernels=ce[3],
        logit_work_bytes=TORCH_LOGIT_WORK if eager_memory else MEGATRON_LOGIT_WORK,
        logit_work_bytes_tp=TORCH_LOSS_PARALLEL_LOGIT_WORK if eager_memory else MEGATRON_LOGIT_WORK,
        op_level_selective=eager_memory,  # the runtime checkpoints with torchtitan's policy (planner.runtime.recompute)
        fp8_saves_fp8_inputs=not titan,
        fp8_dynamic_scaling=titan,
        p2p_overlapped=engine in ("native", "megatron"),
        dp_after_flush=engine == "deepspeed",
        microbatch_host_s=pipe_host,
        fp32_sharded_params=eager_memory and cfg.zero == 3,
        cp_all_gather=titan or native,  # planner.runtime.context_parallel gathers K/V on every device
        sdpa_fa2=eager_memory,
        grads_freed_each_step=eager_memory,
        zero1_shards_grads=eager_memory,
        hsdp_backward_end=native and cfg.pp == 1,
        pp_unsharded_grads=eager_memory and cfg.pp > 1 and cfg.num_microbatches > 1,
        tp_embedding_full_grad=eager_memory,
        sp_saves_gathered_inputs=eager_memory,
        sac_caches_unread_outputs=eager_memory and (not fused or native),
        loss_strands_logits=eager_memory,
        eager_activations=not fused or native,
        fsdp2_low_zero=eager_memory and cfg.zero in (1, 2),
        fsdp_keeps_gathered=titan and cfg.zero == 3 and cfg.pp > 1,
        unit_apart_from_loss=native,
        nosync_keeps_gathered=native and cfg.zero == 3 and cfg.pp > 1,
        pp_keeps_logits=eager_memory and cfg.pp > 1,
        torch_pipelining=eager_memory and cfg.pp > 1,
        replicates_conv1d_blocks=native,
        replicates_experts_over_tp=native,
        unties_tied_head=native,
        pipelined=cfg.pp > 1,
        grad_accum_fused=engine == "megatron" and cfg.grad_accum_fusion is not False,
        tp_async_backward=cfg.tp_async_backward if cfg.tp_async_backward is not None else engine == "megatron",
    )


def sac_saved_matmuls(out_widths: list[float]) -> list[bool]:
    """Which of a block's matmuls (in execution order, by output width) torchtitan's op-level
    selective checkpointing saves: the 1st, 3rd, 5th, ... (see :data:`TORCHTITAN_SAC_SAVED_MM`)."""
    return [(i + 1) % TORCHTITAN_SAC_SAVED_MM == 1 for i in range(len(out_widths))]


GRAD_BUCKET_PARAMS = 40_000_000
"""Megatron DDP's least gradient bucket, in parameters: with ``--overlap-grad-reduce`` and no
``--ddp-bucket-size`` a bucket holds max(40M, 1M x dp) parameters (megatron/core/distributed/
distributed_data_parallel.py: larger DP groups get larger buckets so that ring chunks stay
bandwidth-bound). Each bucket is one collective, launched when its last gradient is ready."""
GRAD_BUCKET_PARAMS_PER_RANK = 1_000_000
"""Megatron's bucket growth per data-parallel rank (same source as :data:`GRAD_BUCKET_PARAMS`)."""
DEEPSPEED_REDUCE_BUCKET_PARAMS = 500_000_000
"""DeepSpeed ZeRO ``reduce_bucket_size`` default (elements reduced per collective; DeepSpeed config
docs, zero_optimization)."""
TORCH_DDP_BUCKET_BYTES = 25 * 2**20
"""PyTorch DDP ``bucket_cap_mb`` default, 25 MiB of gradients per bucket (torch.nn.parallel.
DistributedDataParallel), which torchtitan's DDP path uses."""


def grad_bucket_params(cfg: ParallelConfig) -> float:
    """Parameters per gradient bucket of ``cfg.engine`` (:data:`GRAD_BUCKET_PARAMS`,
    :data:`DEEPSPEED_REDUCE_BUCKET_PARAMS`, :data:`TORCH_DDP_BUCKET_BYTES`)."""
    if cfg.engine == "deepspeed":
        return DEEPSPEED_REDUCE_BUCKET_PARAMS
    if cfg.engine == "torchtitan":
        return TORCH_DDP_BUCKET_BYTES / cfg.grad_reduce_bytes
    return max(GRAD_BUCKET_PARAMS, GRAD_BUCKET_PARAMS_PER_RANK * cfg.dp * cfg.cp)
