"""Cost of the layers around the transformer blocks: embedding, final norm, output head, and generic
(traced) layers, for one micro-batch on one GPU (see ``costmodel.local``)."""

from __future__ import annotations

from costmodel import comm
from costmodel.params import layer_params
from costmodel.kernels import gemm_time, matmul_time, memory_time
from costmodel.local import ACT_BYTES, LayerCost, LocalConfig
from costmodel.specs import ClusterSpec, EmbeddingLayer, GenericLayer, HeadLayer, NormLayer

LOGIT_BYTES = 4
"""Cross-entropy runs on fp32 logits (Megatron ``compute_activation_memory``: 4·s·b·V/t)."""
CE_FWD_BYTES_PER_LOGIT = 38
"""HBM traffic of Megatron's vocab-parallel cross-entropy forward per logit, op by op
(megatron/core/tensor_parallel/cross_entropy.py): ``.float()`` reads 2 and writes 4 bytes, ``max``
reads 4, the in-place ``-= max`` reads and writes 4, ``exp`` reads and writes 4, ``sum`` reads 4,
the in-place ``div_`` (softmax kept for backward) reads and writes 4: 6 + 4 + 8 + 8 + 4 + 8."""
CE_BWD_BYTES_PER_LOGIT = 14
"""Its backward per logit: ``grad_input.mul_`` reads and writes 4 bytes, and the cast of the fp32
gradient back to bf16 for the output layer's backward GEMMs reads 4 and writes 2."""


def _tp_group_all_reduce(cluster: ClusterSpec, cfg: LocalConfig, nbytes: float) -> float:
    if cfg.tp == 1:
        return 0.0
    return comm.all_reduce(cluster, comm.place_group(cfg.tp, 1, cluster.gpus_per_node), nbytes)


def _zero3(params: float, cfg: LocalConfig, cluster: ClusterSpec) -> float:
    """ZeRO-3 gathers and reduce-scatter of a small layer; too small to hide, so exposed."""
    if cfg.zero3_group == 1 or params == 0:
        return 0.0
    group = comm.place_group(cfg.zero3_group, cfg.tp, cluster.gpus_per_node)
    ag = comm.all_gather(cluster, group, params * ACT_BYTES)
    return 2 * ag + comm.reduce_scatter(cluster, group, params * cfg.grad_reduce_bytes)


def _record(fwd: float, bwd: float, tp: float, z3: float, act: float, work: float, params: float, out: float, recompute: float = 0.0,
            again: float = 0.0) -> LayerCost:
    links = {"tp": tp, "cp": 0.0, "ep": 0.0, "dp": z3}
    return LayerCost(fwd, bwd, recompute, links, tp + z3, 0.0, act, work, params, 0.0, out, again)


def embedding_cost(layer: EmbeddingLayer, cfg: LocalConfig, cluster: ClusterSpec) -> LayerCost:
    """Vocabulary-parallel lookup: gather rows, add positions, then one TP all-reduce (a
    reduce-scatter under SP) of the b·s·h output (Megatron ``VocabParallelEmbedding``). Backward
    scatters the gradient into the table."""
    tok_h = cfg.tokens * layer.hidden_size
    fwd = memory_time(cluster, 3 * ACT_BYTES * tok_h, kernels=2)
    bwd = memory_time(cluster, 3 * ACT_BYTES * tok_h, kernels=2)
    tp = _tp_group_all_reduce(cluster, cfg, tok_h * ACT_BYTES)
    params = layer_params(layer) / cfg.tp
    act = 8 * cfg.tokens + tok_h / cfg.sp_div
    return _record(fwd, bwd, tp, _zero3(params, cfg, cluster), act, 0.0, params, tok_h * ACT_BYTES / cfg.sp_div)


EAGER_RMSNORM_BYTES = {False: 8, True: 6}
"""Bytes per element an eager RMSNorm keeps for backward in bf16, by whether it is transformers' own
(``LlamaRMSNorm`` and kin: the fp32 input and the bf16 normalised tensor, 4 + 2) or ``torch.nn.RMSNorm``
(the fp32 input and the fp32 normalised product, 4 + 4), beside 4 B per token of fp32 statistics
(not priced): measured with saved-tensor hooks on the final norms of the differential sweep's Llama
and Mixtral (transformers, 6.14 B per element at h 32) and of ``planner.runtime.models`` (8.14);
``costmodel.memory.eager_block_extra_bytes`` prices a block's norms the same way. A LayerNorm keeps
its bf16 input (``native_layer_norm``): 2."""


def norm_cost(layer: NormLayer, cfg: LocalConfig, cluster: ClusterSpec, transformers_norm: bool = False) -> LayerCost:
    """A final norm: read and write b·s·h (÷t under SP); it stores its input, or, an RMSNorm run
    eagerly (``EngineTerms.eager_activations``), :data:`EAGER_RMSNORM_BYTES` per element
    (``transformers_norm``: the model's blocks are transformers' own)."""
    tok_h = cfg.tokens * layer.hidden_size / cfg.sp_div
    fwd = memory_time(cluster, 2 * ACT_BYTES * tok_h)
    params = float(layer_params(layer))
    eager = layer.norm == "rmsnorm" and cfg.terms is not None and cfg.terms.eager_activations
    act = (EAGER_RMSNORM_BYTES[transformers_norm] if eager else ACT_BYTES) * tok_h
    return _record(fwd, 2 * fwd, 0.0, _zero3(params, cfg, cluster), act, 0.0, params, ACT_BYTES * tok_h)


def head_cost(layer: HeadLayer, cfg: LocalConfig, cluster: ClusterSpec) -> LayerCost:
    """Output projection to a vocabulary split over TP (2·b·s·h·V/t forward, bf16 under FP8 too) and
    the cross-entropy over fp32 logits, with the engine's traffic per logit (``costmodel.engines``:
    Megatron's vocab-parallel loss :data:`CE_FWD_BYTES_PER_LOGIT` / :data:`CE_BWD_BYTES_PER_LOGIT`
    in 6 and 2 kernels, its fused loss, or torchtitan's eager ``cross_entropy`` on ``.float()``
    logits). TP costs one b·s·h all-reduce volume: of the input gradient (column-parallel), or an
    all-gather forward and a reduce-scatter backward under SP. The logits of one micro-batch are
    transient: in 1F1B its backward follows at once on the last stage."""
    terms = cfg.terms
    ce_f, ce_b, k_f, k_b = (
        (terms.ce_fwd_bytes, terms.ce_bwd_bytes, terms.ce_fwd_kernels, terms.ce_bwd_kernels)
        if terms is not None else (CE_FWD_BYTES_PER_LOGIT, CE_BWD_BYTES_PER_LOGIT, 6, 2)
    )
    logits = cfg.tokens * layer.vocab_size / cfg.tp
    gemm = matmul_time(cluster, cfg.tokens, layer.vocab_size / cfg.tp, layer.hidden_size)
    fwd = gemm + memory_time(cluster, ce_f * logits, kernels=k_f)
    bwd = 2 * gemm + memory_time(cluster, ce_b * logits, kernels=k_b)
    tp = _tp_group_all_reduce(cluster, cfg, cfg.tokens * layer.hidden_size * ACT_BYTES)
    params = layer_params(layer) / cfg.tp
    if layer.tied and terms is not None and terms.unties_tied_head and (cfg.tp > 1 or terms.pipelined):
        params = layer.vocab_size * layer.hidden_size / cfg.tp  # the head's own copy (EngineTerms.unties_tied_head)
    act = cfg.tokens * layer.hidden_size * ACT_BYTES / cfg.sp_div
    per_logit = (terms.logit_work_bytes_tp if cfg.tp > 1 else terms.logit_work_bytes) if terms is not None else LOGIT_BYTES + ACT_BYTES
    if terms is not None and terms.pp_keeps_logits:  # the bf16 logits, still in the stage's fwd_cache
        per_logit += ACT_BYTES
    work = logits * per_logit
    return _record(fwd, bwd, tp, _zero3(params, cfg, cluster), act, work, params, 0.0)


def generic_cost(layer: GenericLayer, cfg: LocalConfig, cluster: ClusterSpec) -> LayerCost:
    """A traced layer from its measured per-token totals: GEMM-like FLOPs (split by TP when the layer
    allows it), memory-bound bytes, stored activations; a TP-split layer pays one all-reduce of its
    output forward and one backward (Megatron column→row pattern). Under recomputation the layer keeps
    its output (the next layer's checkpointed input) and, under ``selective``, what the runtime's
    op-level policy saves where the trace measured it (:func:`selective_kept_bytes`); its stored
    activations reappear as the transient of its backward, beside the gradient of its output
    (bf16, the output's bytes ÷ the TP split): autograd's engine holds a node's incoming gradient in
    its input buffer until the node runs (torch ``torch/csrc/autograd/input_buffer.cpp``), and the
    checkpoint recomputes the forward inside that backward (``torch.utils.checkpoint``), whose last op
    also meets the :data:`RECOMPUTE_LIVE_OPERANDS` (:func:`recompute_transient_bytes`). Measured
    with torch's tracker on the differential sweep's CNN (pp 2, dp 2, full recompute, micro-batch 4,
    d0102): the 4.0 KiB output gradient beside the recomputed block at stage 0's peak. Of the stored
    activations the transient holds again (``LayerCost.work_stored_bytes``) only what the selective
    policy saved, in the native runtime (``costmodel.activations.recomputed_stored_bytes``): the output
    is the next layer's checkpointed input, and the recomputation rebuilds its own (measured with torch's
    tracker on the differential sweep's CNN, tp 4, pp 2, full recompute, case d0092: the first stage
    peaks at a recomputed block's last ReLU with its 48.1 KiB transient beside every stored output,
    7.0 % under with the block's 8 KiB output taken off). Not recomputed, the layer stores its saved
    tensors but the input the layer before saves as its own output
    (``GenericLayer.input_saved_bytes_per_token``, ``planner.intake.trace.shared``: autograd keeps one
    tensor; measured with torch's tracker on the differential sweep's CNN, pp 2, GPipe, case d0014 at
    draw seed 1: 10.41 KiB per micro-batch on the first stage, 12.41 priced with each block's input
    again), and its transient is the :data:`RECOMPUTE_LIVE_OPERANDS` its forward's last op holds beside
    them (the same CNN, pp 2, ZB-H1, micro-batch 4, case d0282 at seed 0: the first stage peaks at its
    last block's final ReLU, 8 KiB over the stored activations)."""
    split = cfg.tp if layer.tp_mode != "none" else 1
    flops = cfg.tokens * (layer.fwd_flops_per_token + layer.fwd_attn_flops_per_token_per_ctx * cfg.seq_len) / split
    mem = cfg.tokens * layer.fwd_mem_bytes_per_token / split
    fwd = gemm_time(cluster, flops) + memory_time(cluster, mem)
    bwd = 2 * gemm_time(cluster, flops) + memory_time(cluster, 2 * mem)
    out = cfg.tokens * layer.output_bytes_per_token
    tp = 2 * _tp_group_all_reduce(cluster, cfg, out) if split > 1 else 0.0
    params = layer.params / split
    act = cfg.tokens * layer.activation_bytes_per_token / split
    recompute = fwd if cfg.recompute == "full" else 0.0
    kept = selective_kept_bytes(layer, cfg.tokens, split) if cfg.recompute == "selective" else None
    if cfg.recompute == "full":
        act, work = out, recompute_transient_bytes(act, out / split)
    elif kept is not None:
        act, work = out + kept, recompute_transient_bytes(act, out / split)
    else:  # the saved input the layer before keeps as its own saved output is priced there
        act, work = act - cfg.tokens * layer.input_saved_bytes_per_token / split, RECOMPUTE_LIVE_OPERANDS * out / split
    again = kept if kept is not None and cfg.terms is not None and cfg.terms.engine == "native" else 0.0
    # what a pipeline cut after it sends: under SP each TP rank holds 1/t of the sequence, as after a block
    return _record(fwd, bwd, tp, _zero3(params, cfg, cluster), act, work, params, out / cfg.sp_div, recompute, again)


RECOMPUTE_LIVE_OPERANDS = 2
"""Tensors of its output's size that a traced layer's forward, recomputed or not, holds at its last op beside
the saved tensors it recomputes: autograd saves neither, but they are alive when the checkpoint's
recomputation stops at the last saved tensor (torch 2.13 ``torch/utils/checkpoint.py``, non-reentrant
``_recomputation_hook`` with early stop: the forward runs until its last pack hook). In a residual unit
``relu(branch(x) + shortcut(x))`` (He et al. 2016) they are the branch's output, still bound to the
forward's local, and the sum the final ReLU reads (it saves only its result). Measured with torch's
tracker on the differential sweep's CNN (``tests/planner/runtime/cnn_model.py``: full recompute, pp 2,
dp 2, micro-batch 4, case d0102; selective, tp 4, ZeRO 3, micro-batch 8, case d0274): the recomputed
block peaks at its final ReLU with its four recomputed saved tensors, ``y`` and the sum, 24.0 and 48.1
KiB over the incoming gradient, where its stored activations (its input among them) priced 20.1 and 40.1."""


def recompute_transient_bytes(act: float, out: float) -> float:
    """A recomputed layer's backward transient from its stored activations ``act`` (the
    checkpoint's input among them, already held as the previous layer's output) and its output's
    bytes on this rank ``out``: the recomputed saved tensors (``act`` less the input), the
    :data:`RECOMPUTE_LIVE_OPERANDS` and the output's gradient (autograd's input buffer,
    ``torch/csrc/autograd/input_buffer.cpp``). The input is taken at the output's size, as in a
    shape-preserving unit; a downsampling one (the CNN's strided block: input twice its output) is
    priced over by the difference, which the stage's shape-preserving blocks meet anyway."""
    return act - out + RECOMPUTE_LIVE_OPERANDS * out + out


def selective_kept_bytes(layer: GenericLayer, tokens: float, split: int) -> float | None:
    """Bytes beside its input that a generic layer keeps for backward under ``selective``
    recomputation, for ``tokens`` tokens on one of ``split`` TP ranks: the SDPA outputs and every
    other ``mm`` / ``addmm`` output that the runtime's op-level checkpoint policy saves
    (``planner.runtime.recompute._op_level_policy``, torchtitan's ``_custom_policy``), as the trace
    measured them (``GenericLayer.selective_saved_bytes_per_token``, ``planner.intake.trace.selective``);
    None where the spec does not carry the figure (a hand-written spec: the layer then keeps its
    stored activations, as without recomputation)."""
    per_token = layer.selective_saved_bytes_per_token
    return None if per_token is None else tokens * per_token / split
