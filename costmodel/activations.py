"""Activation memory as each engine's autograd keeps it: the engine-independent bookkeeping of
``costmodel.memory`` (Korthikanti et al. 2022, generalised), adjusted for torchtitan's op-level
selective checkpointing (eager: every saved matmul output cached; compiled: only those backward
reads), eager (uncompiled) fp32 norm intermediates, and FP8 GEMM inputs kept in FP8 by Transformer
Engine."""

from __future__ import annotations

from dataclasses import replace

from costmodel.cp_memory import cp_gathered_kv_bytes
from costmodel.engines import sac_saved_matmuls
from costmodel.flops import ffn_matrices
from costmodel.local import ACT_BYTES, LocalConfig
from costmodel.memory import eager_block_extra_bytes, mlp_bytes_per_ffn_element, sp_gathered_input_bytes, transformer_activation_bytes
from costmodel.specs import TransformerLayer

LSE_BYTES_PER_HEAD = 4
"""FlashAttention / SDPA keeps an fp32 log-sum-exp per query and head for backward."""


def block_activation_bytes(
    layer: TransformerLayer, cfg: LocalConfig, mm_widths: list[float], feeds_residual: list[bool] | None = None
) -> tuple[float, float]:
    """(stored, transient) activation bytes of a block for one micro-batch on one GPU under the
    engine's behaviour. ``mm_widths`` are the output widths per token of the block's matmuls in
    execution order (``costmodel.layer_transformer._projections``), ``feeds_residual`` flags those
    whose output only feeds the residual add (``costmodel.layer_transformer._feeds_residual``).

    torchtitan op-level selective checkpointing (``_custom_policy``, parallelize_llama.py) stores the
    block input, the outputs of every other matmul, and SDPA's output and log-sum-exp; recomputing
    and back-propagating one block needs that block's full activations as a transient. Of the saved
    matmuls, :func:`sac_saved_bytes_per_token` keeps those backward never reads only where the engine
    runs eagerly (``EngineTerms.sac_caches_unread_outputs``). Eager
    PyTorch adds :func:`costmodel.memory.eager_block_extra_bytes` (fp32 RMSNorm intermediates, K/V
    repeated to every head, unfused SwiGLU) to whatever it holds of a block, and DTensor sequence
    parallelism :func:`costmodel.memory.sp_gathered_input_bytes`; see their sources.
    Transformer Engine keeps each FP8 projection's input in FP8 (one byte instead of two: the QKV
    and FC1 inputs, the attention output, the FC2 input).
    """
    terms = cfg.terms
    stored, work = transformer_activation_bytes(layer, cfg)
    if terms is None:
        return stored, work
    h = layer.hidden_size
    eager = eager_block_extra_bytes(layer, cfg) if terms.eager_activations else 0.0  # norms, repeated K/V, SwiGLU (costmodel.memory)
    if terms.sp_saves_gathered_inputs:  # DTensor SP keeps the gathered projection inputs (costmodel.memory)
        eager += sp_gathered_input_bytes(layer, cfg)
    if terms.engine == "native" and terms.cp_all_gather:  # the runtime's gathered K/V (costmodel.cp_memory)
        eager += cp_gathered_kv_bytes(layer, cfg)
    if terms.engine == "native":  # the experts' saved combine inputs and routing indices
        eager += moe_combine_saved_bytes(layer, cfg)
    # the experts' backward, first at their weighted combine; on top of a recomputed block's activations
    moe = moe_combine_backward_bytes(layer, cfg) if terms.engine == "native" else 0.0
    backward = _mlp_backward(layer, cfg) + moe
    if terms.op_level_selective and cfg.recompute == "selective" and (not layer.is_moe or terms.engine == "native"):
        full, _ = transformer_activation_bytes(layer, replace(cfg, recompute="none"))
        residual = feeds_residual if feeds_residual is not None else [False] * len(mm_widths)
        if layer.is_moe:  # the native runtime's MoE block: router and per-expert matmuls (moe_sac_matmuls)
            mm_widths, residual = moe_sac_matmuls(layer, cfg, mm_widths)
        saved = sac_saved_bytes_per_token(mm_widths, residual, terms.sac_caches_unread_outputs)
        per_token = ACT_BYTES * (h / cfg.sp_div + layer.o_width / cfg.tp) + saved + LSE_BYTES_PER_HEAD * layer.num_heads / cfg.tp
        return cfg.tokens * per_token, full + eager + backward
    if cfg.fp8 and terms.fp8_saves_fp8_inputs and cfg.recompute != "full":
        o, f = layer.o_width, layer.ffn_hidden_size * max(1, layer.moe_top_k)
        stored -= cfg.tokens * (2 * h / cfg.sp_div + (o + f) / cfg.tp)
    if cfg.recompute == "full":
        return stored, work + eager + backward
    return stored + eager, max(work + moe, backward)


def recomputed_stored_bytes(layer: TransformerLayer, cfg: LocalConfig, stored: float) -> float:
    """Of a recomputed block's ``stored`` activations (:func:`block_activation_bytes`), the bytes its
    transient holds again, in the native runtime (``planner.runtime.recompute``; 0 elsewhere and
    without recomputation). ``torch.utils.checkpoint``'s non-reentrant recomputation hands the
    recomputed ops the tensors the forward kept: under op-level selective checkpointing
    ``_CachedTorchDispatchMode`` pops each ``MUST_SAVE`` output ``_CachingTorchDispatchMode`` cached
    and returns it in place of recomputing it (torch 2.13 ``torch/utils/checkpoint.py``), so those are
    the transient's own; the block's input (``h`` per token) is among the transient's tensors only
    where the block's first op saves it as it comes, a LayerNorm (``native_layer_norm`` saves its
    input), not an eager RMSNorm, which saves an fp32 copy (``costmodel.memory.eager_block_extra_bytes``).
    Measured with torch's tracker on the differential's custom block (LayerNorm, h 32, 128 tokens,
    selective, tests/costmodel/test_ranks.py): 123.0 KiB at its backward with the 8 KiB output, where
    its 114 KiB transient and the output priced 122.0 and the 50 KiB stored beside them 172.0."""
    terms = cfg.terms
    if terms is None or terms.engine != "native" or cfg.recompute == "none":
        return 0.0
    if cfg.recompute == "selective" and not terms.op_level_selective:
        return 0.0
    own_input = 0.0 if layer.norm == "layernorm" else cfg.tokens * ACT_BYTES * layer.hidden_size / cfg.sp_div
    return max(stored - own_input, 0.0)


def _mlp_backward(layer: TransformerLayer, cfg: LocalConfig) -> float:
    """The larger of :func:`eager_mlp_backward_bytes` and :func:`eager_rmsnorm_backward_bytes` where
    the engine runs a dense block's backward eagerly, else 0."""
    eager = cfg.terms is not None and cfg.terms.eager_activations
    return max(eager_mlp_backward_bytes(layer, cfg), eager_rmsnorm_backward_bytes(layer, cfg)) if eager and not layer.is_moe else 0.0


EAGER_RMSNORM_BACKWARD_TEMPS = 5
"""fp32 h-wide temporaries per token transformers' ``LlamaRMSNorm`` backward holds at once beside its
saved fp32 input (``hidden_states.to(float32)``, ``pow(2).mean``, ``* rsqrt``, ``.to(bf16)``: the
gradient through ``* rsqrt``, ``mean``'s expanded gradient, ``pow``'s ``x^1``, its ``* 2`` and the
product with the gradient, all fp32). Measured with torch's tracker on the differential sweep's
Llama (tp 2, pp 2, no recompute, case d0140): five 16 KiB fp32 temporaries at 128 tokens, h 32, at
``pow``'s backward ``mul`` inside a block's MLP norm backward, the rank's peak."""


def eager_rmsnorm_backward_bytes(layer: TransformerLayer, cfg: LocalConfig) -> float:
    """Net bytes a dense transformers block's MLP norm backward (``TransformerLayer.transformers_block``,
    RMSNorm) adds to the block's stored activations: :data:`EAGER_RMSNORM_BACKWARD_TEMPS` fp32
    b·s·h tensors (÷t under SP), less what the MLP's backward has freed by then: its saved input
    (the norm's bf16 output, 2h), the norm's bf16 normalised tensor the weight multiplies (2h) and
    the MLP's saved activations (:func:`costmodel.memory.mlp_bytes_per_ffn_element` per FFN element,
    2f more for an unfused SwiGLU, ÷t). Measured with torch's tracker on the differential sweep's
    Llama (tp 2, pp 2, no recompute, case d0140, 128 tokens): 31.5 KiB of activations above the
    stage's stored at that peak, where the MLP backward alone priced 16 (-4.8 %); 32 priced here."""
    if layer.norm != "rmsnorm" or not layer.transformers_block:
        return 0.0
    h, f = layer.hidden_size / cfg.sp_div, layer.ffn_hidden_size / cfg.tp
    mlp = (mlp_bytes_per_ffn_element(layer.ffn_act) + (2 if layer.ffn_act == "swiglu" else 0)) * f
    return cfg.tokens * max(0.0, EAGER_RMSNORM_BACKWARD_TEMPS * 4 * h - 2 * ACT_BYTES * h - mlp)


def eager_mlp_backward_bytes(layer: TransformerLayer, cfg: LocalConfig) -> float:
    """Net bytes a dense block's MLP backward adds to the activations the block holds, under eager
    autograd: the activation function's backward holds its incoming gradient and the gradients of its
    two inputs (SwiGLU's ``mul``: gate and up), three b·s·f/t bf16 tensors, less the second
    projection's saved input that its backward has just freed: two b·s·f/t bf16 tensors (the
    projection's weight gradient is a gradient, priced with the unit's: ``costmodel.rank_memory``). Without recompute the block's own activations are among those stored; under
    full and op-level selective recompute the recomputed block holds all its activations when its
    backward starts with the MLP, so this comes on top of them. Measured with torch's tracker (torch
    2.13, FSDP2, fake tensors) on ``bench/memory_oracle.py --cp``'s zb-h1 pp 2 plan of a 1.1B Llama
    under full recompute (h 2,048, f 5,632, 16,384 tokens per micro-batch): the first stage peaks at
    the second ``mul`` of a recomputed block's SwiGLU backward with two 176 MiB b·s·f tensors of
    temporaries beyond the block's activations (0.37 GiB under-priced, -4.6 %)."""
    f = layer.ffn_hidden_size / cfg.tp
    return ACT_BYTES * 2 * cfg.tokens * f


def sac_saved_bytes_per_token(mm_widths: list[float], feeds_residual: list[bool], caches_unread: bool) -> float:
    """Bytes per token (bf16) of the matmul outputs op-level selective checkpointing keeps for one
    block: the outputs of the matmuls torchtitan's policy marks ``MUST_SAVE`` (every other one,
    :func:`costmodel.engines.sac_saved_matmuls`), less, under torch.compile, those whose output only
    feeds the residual add, which backward never reads (``feeds_residual``).

    Eager (``caches_unread``): ``torch.utils.checkpoint``'s ``_CachingTorchDispatchMode`` stores the
    output of every ``MUST_SAVE`` op at the op, before anyone knows who reads it, and hands it back
    when the recomputation replays the op; for Llama's seven projections (``wq wk wv wo w1 w3 w2``,
    saved 1st, 3rd, 5th, 7th) that includes ``w2``'s output, 2h bytes per token. Compiled: the
    checkpoint is traced into the block's joint graph and AOTAutograd's min-cut partitioner
    (torch/_functorch/partitioners.py ``min_cut_rematerialization_partition``) treats ``MUST_SAVE`` as
    "never recompute", saving a node only if the backward graph needs it. Checked with torch 2.13 on
    a Llama block (tests/costmodel/test_sac_cache.py): the eager cache holds ``wq wv w1 w2`` and SDPA's
    outputs, the compiled forward graph returns ``wq wv w1`` and SDPA's outputs."""
    keep = sac_saved_matmuls(mm_widths)
    return ACT_BYTES * sum(w for w, k, r in zip(mm_widths, keep, feeds_residual) if k and (caches_unread or not r))


def moe_sac_matmuls(layer: TransformerLayer, cfg: LocalConfig, attn_widths: list[float]) -> tuple[list[float], list[bool]]:
    """(output widths per token of the block's ``aten.mm`` calls in execution order, whether each only
    feeds the residual) of a MoE block as the native runtime runs it under op-level selective
    checkpointing (``planner.runtime.recompute``: every other ``mm`` saved, counted over the block):
    the attention projections ``attn_widths``, the router's ``gate`` (``E`` logits per token,
    transformers' ``MixtralTopKRouter``: an ``F.linear`` on the flattened tokens) and, under expert
    parallelism, each local expert's gate-up (``2f``) and down (``h``) ``F.linear`` on its rows
    (``planner.runtime.expert_parallel.ParallelExperts._experts``; ``T k`` rows over the ``E / ep``
    local experts, stated per token as ``k / (E / ep)`` of a row each). Without expert parallelism
    the experts run transformers' ``grouped_mm`` (``aten._grouped_mm``, not an ``mm``): recomputed.
    A shared expert (DeepSeek-V3, Qwen-MoE: transformers 5.25's ``DeepseekV3MoE.forward`` adds
    ``shared_experts(residuals)`` after the routed experts, and ``DeepseekV3MLP`` calls ``gate_proj``,
    ``up_proj``, ``down_proj`` in that order) runs its ``F.linear`` on every token, split by TP. Measured with torch's tracker on the
    differential sweep's Mixtral (h 32, 4 experts, top 2): one GPU, micro-batch 8, selective (case
    d0083), where the whole block's activations were priced as stored [the router's logits
    replicated over TP; the shared expert's order from transformers' source, not measured]."""
    widths = list(attn_widths) + [float(layer.num_experts)]
    if cfg.ep > 1:
        local = max(1, layer.num_experts // cfg.ep)
        share = max(1, layer.moe_top_k) / local / cfg.expert_tp
        for _ in range(local):
            widths += [2 * layer.ffn_hidden_size * share, layer.hidden_size * share]
    shared = layer.shared_expert_ffn_hidden_size / cfg.tp
    if shared:
        widths += [shared] * (ffn_matrices(layer) - 1) + [float(layer.hidden_size)]
    return widths, [False] * len(widths)


MOE_COMBINE_BACKWARD_BYTES = (14, 1.5)
"""(bytes per routed token copy, per token) per unit of the hidden size that the backward of
transformers' ``grouped_mm`` experts (``transformers.integrations.moe.grouped_mm_experts_forward``)
holds beside the block's saved activations at its first step, the weighted combine: the router's
weights are fp32, so ``proj_out * sample_weights_g`` is an fp32 ``(T k, h)`` tensor, and its
backward's gradients (the ``sum`` over top-k expanded, the ``inv_perm`` index's zero-filled scatter,
the product's fp32 gradients before the cast to bf16) are fp32 copies of it; the output gradient's
fp32 upcast is per token. Measured with torch's ``MemTracker`` on ``MixtralSparseMoeBlock`` in bf16
(transformers 5.25, CPU): 14h per copy of temporaries and 1.5-1.75h per token of activations above
the forward's, at h 32 and 64, f 32-128, 4-8 experts, top 1-2, 128-256 tokens (the differential
sweep's Mixtral: 112.0 KiB of temporaries at 128 tokens, the "temporaries" its pp 2 first stage
measures at its peak)."""


MOE_EP_COMBINE_BACKWARD_BYTES = (6, 14)
""":data:`MOE_COMBINE_BACKWARD_BYTES` of the runtime's expert-parallel dispatch
(``planner.runtime.expert_parallel.ParallelExperts``: ``back * weights`` then an out-of-place
``index_add`` over the token index, whose backward gathers the output gradient per copy and
scatters it back through the all-to-all). Measured with torch's ``MemTracker`` on
``MixtralSparseMoeBlock`` with its experts replaced by ``ParallelExperts`` (one-rank gloo group,
bf16, 128 tokens): 26h per token above the forward's activations at top 2 (h 32 and 64, f 64 and
128), 19.7h at top 1; the forward's own peak (the combine's index_add) stays below it, 18.5h."""


def moe_combine_backward_bytes(layer: TransformerLayer, cfg: LocalConfig) -> float:
    """Transient bytes of a MoE block's experts' backward at its weighted combine
    (:data:`MOE_COMBINE_BACKWARD_BYTES`), on the rank's tokens; 0 for a dense block; under expert
    parallelism, whose experts run the runtime's own dispatch (``planner.runtime.expert_parallel``),
    :data:`MOE_EP_COMBINE_BACKWARD_BYTES`. In every recompute mode (``block_activation_bytes``): on
    top of a recomputed block's activations, whose backward starts at the combine. Measured with
    torch's tracker on the differential sweep's Mixtral at tp 2, pp 4, full recompute (case d0221,
    one block a stage, 128 tokens): the stage peaks at the combine's ``index_put`` backward with
    322 KiB of temporaries and no gradient (the layer-by-layer end of a backward,
    ``costmodel.rank_phases.layer_by_layer_end``), where the recomputed block alone priced 225 KiB."""
    if not layer.is_moe:
        return 0.0
    per_copy, per_token = MOE_EP_COMBINE_BACKWARD_BYTES if cfg.ep > 1 else MOE_COMBINE_BACKWARD_BYTES
    return cfg.tokens * layer.hidden_size * (per_copy * max(1, layer.moe_top_k) + per_token)


MOE_COMBINE_SAVED_BYTES = (2, 40, 4)
"""(bytes per routed token copy per unit of the hidden size, per copy, per token and expert) an
eager MoE block saves for backward beyond :func:`costmodel.memory.transformer_activation_bytes`'
experts (their SwiGLU and the permuted tokens) and the SwiGLU product: the experts' bf16 down-projection output, which the
product with the routing weights saves (2h per copy); the fp32 routing weight and the int64 sort
permutation, its inverse and the token index each copy keeps (about 40 B per copy); the router's
fp32 probabilities (4 B per expert and token). transformers' ``grouped_mm_experts_forward``
(``proj_out * sample_weights_g``, ``weighted_out[inv_perm]``) and the runtime's
``planner.runtime.expert_parallel.ParallelExperts`` (``back * weights``, ``index_add`` over
``token``) alike. Measured with torch's ``MemTracker`` on ``MixtralSparseMoeBlock`` in bf16
(transformers 5.25, CPU): 1,444 B per token at h 32, f 64, 4 experts, top 2 (228 B beyond the
priced terms and the block's output; 224 by this term), +10h per token for +32 in h, +16 B for 4 more
experts, 764 B at top 1. With ``ParallelExperts`` (one-rank gloo group): 2h + 8 B more per copy
(1,588 B per token at h 32, 2,036 at h 64), priced as 2h more."""


def moe_combine_saved_bytes(layer: TransformerLayer, cfg: LocalConfig) -> float:
    """Activation bytes of :data:`MOE_COMBINE_SAVED_BYTES` for one micro-batch on the rank's tokens
    (the combine's outputs are ``h`` wide on every TP rank); 0 for a dense block."""
    if not layer.is_moe:
        return 0.0
    per_h, per_copy, per_expert = MOE_COMBINE_SAVED_BYTES
    if cfg.ep > 1:  # ParallelExperts also keeps the all-to-all's received rows (MOE_COMBINE_SAVED_BYTES)
        per_h += 2
    copies = cfg.tokens * max(1, layer.moe_top_k)
    return copies * (per_h * layer.hidden_size + per_copy) + cfg.tokens * per_expert * layer.num_experts
