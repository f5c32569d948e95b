"""Cost of one transformer block for one micro-batch on one GPU (see ``costmodel.local``)."""

from __future__ import annotations

import math

from costmodel import comm
from costmodel.flops import CAUSAL_ATTENTION_FRACTION, attention_context, attention_core_width, ffn_matrices
from costmodel.params import expert_params, layer_params, mla_replicated_params, norm_params, qk_norm_params
from costmodel.engines import sac_saved_matmuls
from costmodel.kernels import attention_time, matmul_time, memory_time
from costmodel.precision import cast_bytes_per_element
from costmodel.local import ACT_BYTES, LayerCost, LocalConfig
from costmodel.activations import block_activation_bytes, moe_sac_matmuls, recomputed_stored_bytes
from costmodel.specs import ClusterSpec, TransformerLayer


def _projections(layer: TransformerLayer, cfg: LocalConfig) -> list[tuple[float, float, float]]:
    """:func:`_projection_parts`, attention then MLP, as one list."""
    attn, mlp = _projection_parts(layer, cfg)
    return attn + mlp


def _feeds_residual(layer: TransformerLayer, cfg: LocalConfig) -> list[bool]:
    """For each of :func:`_projections`, whether its output only feeds the residual add (the last
    projection of the attention and of the MLP: ``wo`` and ``w2``), so that backward never reads it
    (the add's gradient passes through unchanged; a matmul's gradients read its input and weight)."""
    return [i == len(part) - 1 for part in _projection_parts(layer, cfg) for i in range(len(part))]


def _projection_parts(layer: TransformerLayer, cfg: LocalConfig) -> tuple[list[tuple[float, float, float]], list[tuple[float, float, float]]]:
    """The dense block's projections in execution order as (n, k, output width) per token on one
    rank, under TP's column (QKV, FC1) and row (out-projection, FC2) splits (Shoeybi et al. 2019
    §3). Megatron fuses Q, K and V into one GEMM (and gate and up); torchtitan runs ``wq``, ``wk``,
    ``wv``, ``wo``, ``w1``, ``w3``, ``w2`` one by one (torchtitan/models/llama/model.py). Multi-head
    latent attention: :func:`_mla_projections`."""
    t, h = cfg.tp, layer.hidden_size
    q, kv, f = layer.num_heads * layer.head_dim, layer.num_kv_heads * layer.head_dim, layer.ffn_hidden_size
    gated = ffn_matrices(layer) == 3
    if cfg.terms is not None and cfg.terms.op_level_selective:
        attn = [(q / t, h, q / t), (kv / t, h, kv / t), (kv / t, h, kv / t), (h, q / t, h)]
        mlp = [(f / t, h, f / t)] + ([(f / t, h, f / t)] if gated else []) + [(h, f / t, h)]
    else:
        attn = [((q + 2 * kv) / t, h, (q + 2 * kv) / t), (h, q / t, h)]
        up = (ffn_matrices(layer) - 1) * f
        mlp = [(up / t, h, up / t), (h, f / t, h)]
    if layer.is_mla:
        attn = _mla_projections(layer, cfg)
    return attn, ([] if layer.is_moe else mlp)


def _mla_projections(layer: TransformerLayer, cfg: LocalConfig) -> list[tuple[float, float, float]]:
    """MLA's projections as (n, k, output width) per token on one rank, in execution order (HF
    ``modeling_deepseek_v3.py``: ``q_a_proj``, ``q_b_proj``, ``kv_a_proj_with_mqa``, ``kv_b_proj``,
    ``o_proj``). Megatron-core ``multi_latent_attention.py``: the down-projections are duplicated on
    every TP rank (on the rank's s/t tokens under SP, stated here as n/t), the up-projections are
    column-parallel and the output projection row-parallel."""
    t, h, d = cfg.tp, layer.hidden_size, cfg.sp_div
    qr, kv_down = layer.q_lora_rank, layer.kv_lora_rank + layer.qk_rope_head_dim
    kv_up = layer.num_heads * (layer.qk_nope_head_dim + layer.v_head_dim)
    q = [(qr / d, h, qr / d), (layer.q_width / t, qr, layer.q_width / t)] if qr else [(layer.q_width / t, h, layer.q_width / t)]
    return q + [(kv_down / d, h, kv_down / d), (kv_up / t, layer.kv_lora_rank, kv_up / t), (h, layer.o_width / t, h)]


def _tp_input_width(layer: TransformerLayer) -> float:
    """Width per token of what the attention's column-parallel projections read, all-gathered under
    SP and all-reduced (their input gradient) backward: the hidden state, or for MLA the query latent
    (or h without one), the key/value latent and the shared rotary key (Megatron-core
    ``multi_latent_attention.py``: ``linear_q_up_proj`` / ``linear_kv_up_proj`` gather their latents,
    ``k_pos_emb`` is gathered from the sequence-parallel region)."""
    if not layer.is_mla:
        return float(layer.hidden_size)
    return float((layer.q_lora_rank or layer.hidden_size) + layer.kv_lora_rank + layer.qk_rope_head_dim)


def _gemms_time(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec) -> tuple[float, float]:
    """(forward time of a block's projections, of which the matmuls torchtitan's op-level selective
    checkpointing recomputes: every other one, ``costmodel.engines.sac_saved_matmuls``). FP8 runs
    the projections and experts at ``cfg.fp8_speedup``; the router stays bf16. A cross-attention
    block reading a fixed-length encoder (``cross_seq_len``, Whisper) projects K and V once per
    encoder position and adds its QKᵀ / PV over those positions."""
    m, h, x = cfg.tokens, layer.hidden_size, cfg.fp8_speedup
    shapes = _projections(layer, cfg)
    times = [matmul_time(cluster, m, n, k, 1, x) for n, k, _ in shapes]
    saved = sac_saved_matmuls([w for _, _, w in shapes])
    time = sum(times)
    recomputed = sum(tt for tt, keep in zip(times, saved) if not keep)
    t = cfg.tp
    q, kv = layer.num_heads * layer.head_dim, layer.num_kv_heads * layer.head_dim
    if layer.cross_attention and layer.cross_seq_len:  # Q and O per token, K and V per encoder position,
        enc = cfg.micro_batch * layer.cross_seq_len / cfg.cp  # and the core over every encoder position
        time += matmul_time(cluster, m, 2 * q / t, h, 1, x) + matmul_time(cluster, enc, 2 * kv / t, h, 1, x)
        time += matmul_time(cluster, m, h, q / t, 1, x)
        time += matmul_time(cluster, m / cfg.micro_batch, layer.cross_seq_len, layer.head_dim,
                            cfg.micro_batch * layer.num_heads / t) * attention_core_width(layer) / layer.q_width
    elif layer.cross_attention:
        time += matmul_time(cluster, m, (2 * q + 2 * kv) / t, h, 1, x) + matmul_time(cluster, m, h, q / t, 1, x)
    if not layer.is_moe:
        return time, recomputed
    up = (ffn_matrices(layer) - 1) * layer.ffn_hidden_size
    local = max(1, layer.num_experts // cfg.ep)
    routed = m * layer.moe_top_k * cfg.ep / layer.num_experts
    experts = (matmul_time(cluster, routed, up / t, h, local, x), matmul_time(cluster, routed, h, layer.ffn_hidden_size / t, local, x))
    router = matmul_time(cluster, m, layer.num_experts, h)
    shared = layer.shared_expert_ffn_hidden_size
    shared_s = (matmul_time(cluster, m, (ffn_matrices(layer) - 1) * shared / t, h, 1, x), matmul_time(cluster, m, h, shared / t, 1, x)) if shared else (0.0, 0.0)
    time += sum(experts) + router + sum(shared_s)
    if cfg.terms is not None and cfg.terms.op_level_selective and cfg.terms.engine == "native":
        recomputed += _native_moe_recomputed_s(layer, cfg, [w for _, _, w in shapes], router, experts, shared_s)
    return time, recomputed


def _native_moe_recomputed_s(layer: TransformerLayer, cfg: LocalConfig, attn_widths: list[float], router_s: float,
                             experts_s: tuple[float, float], shared_s: tuple[float, float]) -> float:
    """Forward time of the MoE part of a block that the native runtime's op-level selective
    checkpointing recomputes (``planner.runtime.recompute``: every other ``mm`` of the block saved,
    every other op re-run), the matmuls in the order of
    :func:`costmodel.activations.moe_sac_matmuls`, whose saved outputs the memory counts: the router,
    under expert parallelism each local expert's gate-up and down (``experts_s``: all local experts'
    gate-ups, downs), the shared expert's (``shared_s``: gate and up, down; gate and up one half
    each); without expert parallelism transformers' ``grouped_mm`` experts (not an ``mm``), all
    recomputed."""
    widths, _ = moe_sac_matmuls(layer, cfg, attn_widths)
    saved = sac_saved_matmuls(widths)[len(attn_widths):]
    local = max(1, layer.num_experts // cfg.ep)
    times = [router_s]
    if cfg.ep > 1:
        times += [experts_s[0] / local, experts_s[1] / local] * local
    if layer.shared_expert_ffn_hidden_size:
        gate_up = ffn_matrices(layer) - 1
        times += [shared_s[0] / gate_up] * gate_up + [shared_s[1]]
    recomputed = sum(tt for tt, keep in zip(times, saved) if not keep)
    return recomputed + (sum(experts_s) if cfg.ep == 1 else 0.0)


def _fp8_cast_time(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec) -> tuple[float, float]:
    """(forward, backward) time of FP8 quantisation: every projection's input activation forward and
    its output gradient backward, at ``costmodel.precision.cast_bytes_per_element`` each; torchao
    (dynamic scaling, inputs kept in bf16) also recasts each weight forward and backward."""
    if not cfg.fp8:
        return 0.0, 0.0
    terms = cfg.terms
    dynamic = bool(terms and terms.fp8_dynamic_scaling)
    per = cast_bytes_per_element(cluster, dynamic, bool(terms is None or terms.fused))
    shapes = _projections(layer, cfg)
    inputs = cfg.tokens * sum(k for _, k, _ in shapes)
    grads = cfg.tokens * sum(n for n, _, _ in shapes)
    weights = sum(n * k for n, k, _ in shapes) * (per if dynamic else 0.0)
    kernels = len(shapes)
    return memory_time(cluster, per * inputs + weights, kernels), memory_time(cluster, per * grads + weights, kernels)


def _transformer_compute(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec) -> tuple[float, float, float, float]:
    """Forward, backward, selective-recompute and attention-core times of a block.

    Backward GEMMs cost 2x forward (dgrad + wgrad); FlashAttention backward 2.5x forward (it recomputes
    QKᵀ; costmodel-notes 2.3); eager attention executes the full s² (masking skips no work) as one
    batched GEMM over all heads, plus the softmax and dropout passes over the s x s scores.
    Elementwise ops run op by op (eager) move the bytes :func:`_elementwise_bytes` counts per op;
    their backward kernels move what it counts with ``backward`` (fused kernels: read the saved
    input and dy, write dx, per op; the softmax one pass more, :data:`SOFTMAX_BACKWARD_EXTRA`).
    Selective recomputation re-runs the attention core (Megatron) or every
    other matmul and every elementwise op (torchtitan's op-level policy).
    """
    t = cfg.tp
    fused = cfg.terms is None or cfg.terms.fused
    gemms, sac_gemms = _gemms_time(layer, cfg, cluster)
    frac = CAUSAL_ATTENTION_FRACTION if cfg.flash else 1.0
    core = 2.0 * cfg.tokens * attention_context(layer, cfg.seq_len, frac) * attention_core_width(layer) / t
    if cfg.flash:
        d = layer.head_dim
        ctx = attention_context(layer, cfg.seq_len / cfg.cp, frac)
        sdpa = cfg.terms is not None and cfg.terms.sdpa_fa2
        attn_f = attention_time(cluster, core, d, ctx, layer.causal, sdpa)
        attn_b = attention_time(cluster, 2.5 * core, d, ctx, layer.causal, sdpa)
        softmax_bytes = softmax_b_bytes = 0.0
    else:
        heads = layer.num_heads / t
        per_head = cfg.tokens / cfg.micro_batch
        qk = matmul_time(cluster, per_head, cfg.seq_len, layer.head_dim, heads * cfg.micro_batch)
        attn_f = qk * attention_core_width(layer) / layer.q_width  # QKᵀ, and PV (as wide for MHA)
        attn_b = 2 * attn_f
        drop = 2.5 if layer.dropout else 0.0
        chain = 2.0 if fused else 2.0 + EAGER_SCALE_MASK_PASSES
        scores = ACT_BYTES * cfg.tokens * heads * cfg.seq_len
        softmax_bytes = (chain + drop) * scores
        softmax_b_bytes = (chain + SOFTMAX_BACKWARD_EXTRA + drop) * scores if fused else 2 * softmax_bytes
    kernels = 6 if fused else 18
    mem_f = memory_time(cluster, _elementwise_bytes(layer, cfg) + softmax_bytes, kernels)
    mem_b = memory_time(cluster, _elementwise_bytes(layer, cfg, backward=True) + softmax_b_bytes, kernels)
    cast_f, cast_b = _fp8_cast_time(layer, cfg, cluster)
    fwd = gemms + attn_f + mem_f + cast_f
    bwd = 2 * gemms + attn_b + mem_b + cast_b
    if cfg.terms is not None and cfg.terms.op_level_selective:
        selective = sac_gemms + mem_f + cast_f
    else:
        selective = 0.0 if cfg.flash else attn_f + memory_time(cluster, softmax_bytes, kernels=2)
    return fwd, bwd, selective, attn_f + attn_b


def _elementwise_bytes(layer: TransformerLayer, cfg: LocalConfig, backward: bool = False) -> float:
    """HBM bytes of a block's memory-bound forward ops: 2 norms, 2 residual adds, dropouts (replicated
    across TP unless SP), and the activation function (split by TP). Element counts per token, as
    fused kernels run them: norm 2h each, residual add 3h each, with its dropout inside (Megatron's
    fused bias-dropout-add reads the branch and the residual and writes the sum, 3h, as
    :data:`EAGER_BIAS_DROPOUT_ADD_ELEMENTS` counts it); GELU 2f, SwiGLU 3f (read gate and up, write); MLA adds its two latent norms (replicated, split by SP). Op by op
    (eager PyTorch, ``costmodel.engines``) a block moves :data:`EAGER_RMSNORM_ELEMENTS` per RMSNorm
    element, 5f for SwiGLU (``silu`` then the product) and :data:`EAGER_ROTARY_ELEMENTS` per query
    and key element for rotary embeddings (MLA: the rotary part of every query and the one shared
    rotary key).

    ``backward``: the same ops' backward kernels, counted op by op (:data:`NORM_BACKWARD_ELEMENTS`,
    :data:`ACTIVATION_BACKWARD_ELEMENTS`): a fused norm reads x and dy and writes dx (3h); the
    gradients meeting at each residual add are summed (read 2h, write h: 3h, as the add forward);
    dropout's backward reads dy and the mask and writes dx (2h, a kernel of its own); GELU's reads x and dy
    and writes dx (3f), SwiGLU's reads gate, up and dy and writes both gradients (5f). Op by op
    (unfused: eager PyTorch, Megatron-LM 2019) the backward moves twice the forward bytes, as every
    backward did before these counts: autograd runs one or two backward ops per forward op and
    reads their saved inputs [assumption]."""
    h, f = layer.hidden_size, layer.ffn_hidden_size * max(1, layer.moe_top_k)
    fused = cfg.terms is None or cfg.terms.fused
    if backward and not fused:
        return 2 * _elementwise_bytes(layer, cfg)
    rms = layer.norm == "rmsnorm" and not fused
    norm = EAGER_RMSNORM_ELEMENTS if rms else (NORM_BACKWARD_ELEMENTS if backward else 2)
    dropout = 4 * h if layer.dropout and backward else 0  # forward: inside the fused bias-dropout-add
    repl = 2 * norm * h + 6 * h + dropout
    repl += norm * ((layer.q_lora_rank or 0) + layer.kv_lora_rank)  # MLA's latent norms
    if not fused and (layer.out_bias or layer.mlp_bias or layer.dropout):
        repl += 2 * EAGER_BIAS_DROPOUT_ADD_ELEMENTS * h
    if layer.ffn_act == "swiglu":
        act = (ACTIVATION_BACKWARD_ELEMENTS["swiglu"] if backward else 3) * f if fused else 5 * f
    elif layer.ffn_act == "gelu_tanh" and not fused:
        act = EAGER_GELU_TANH_ELEMENTS * f
    else:
        act = (ACTIVATION_BACKWARD_ELEMENTS["gelu"] if backward else 2) * f
    if rms:
        heads = layer.num_heads + (1 if layer.is_mla else layer.num_kv_heads)
        act += EAGER_ROTARY_ELEMENTS * heads * (layer.qk_rope_head_dim if layer.is_mla else layer.head_dim)
    return ACT_BYTES * cfg.tokens * (repl / cfg.sp_div + act / cfg.tp)


NORM_BACKWARD_ELEMENTS = 3
"""Element reads and writes per hidden element of a fused LayerNorm / RMSNorm backward: read x and dy,
write dx; the saved per-token mean and inverse deviation and the weight-gradient reduction are
O(tokens + h) (apex ``fused_layer_norm_cuda`` ``cuComputeGradInput``, Transformer Engine's layernorm
backward) [derived, op by op]; the forward reads x and writes y (2)."""
ACTIVATION_BACKWARD_ELEMENTS = {"gelu": 3, "swiglu": 5}
"""Element reads and writes per FFN element of a fused activation's backward: GELU reads its input
and dy and writes dx (3; Megatron ``fused_bias_gelu.py`` ``bias_gelu_back``); SwiGLU reads gate, up
and dy and writes d(gate) and d(up) (5; Megatron ``fused_bias_swiglu.py`` ``swiglu_back``)
[derived, op by op]; forward 2 and 3."""
SOFTMAX_BACKWARD_EXTRA = 1.0
"""Element passes per attention score that a softmax backward makes beyond its forward: it reads the
probabilities and their gradient and writes the input gradient (3) where the forward reads the scores
and writes the probabilities (2) (Megatron ``fused_softmax`` ``scaled_masked_softmax_backward``:
dx = y·(dy − Σ y·dy)); scaling, masking and dropout move as many bytes backward as forward
(read dy and the mask, write dx) [derived, op by op]."""


EAGER_SCALE_MASK_PASSES = 6.0
"""Element reads and writes per attention score that unfused eager attention adds before the softmax:
scaling by 1/sqrt(d), then the causal mask as a multiply and a subtract (Megatron-LM 2019
``model/gpt2_modeling.py`` / ``mpu/transformer.py``: ``scores / sqrt(d)``, ``scores * mask - 10000 *
(1 - mask)``), each reading and writing the s x s scores; Megatron's fused scale-mask-softmax kernel
(added after, megatron/fused_kernels) does it in the softmax's one pass. [derived, op by op]"""
EAGER_RMSNORM_ELEMENTS = 14
"""2-byte element equivalents an eager RMSNorm moves per input element (torchtitan/models/norms.py
``x.float()``, ``pow(2).mean`` (one reduction kernel), ``* rsqrt``, ``type_as``, ``* weight``:
read 2 + write 4, read 4, read 4 + write 4, read 4 + write 2, read 2 + write 2 = 28 bytes) against
the fused kernel's read and write (2). [derived, op by op]"""
EAGER_GELU_TANH_ELEMENTS = 18
"""Element reads and writes per FFN element of the tanh GELU written op by op (transformers
``NewGELUActivation``: ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3))))``): eight
kernels, ``0.5 * x``, ``pow``, ``* 0.044715``, ``x +``, ``* sqrt(2/pi)``, ``tanh``, ``1 +``, the
product, each reading its one or two inputs and writing its output (2 + 2 + 2 + 3 + 2 + 2 + 2 + 3),
against the fused kernel's read and write (2) [derived, op by op]."""
EAGER_BIAS_DROPOUT_ADD_ELEMENTS = 4.5
"""Extra element reads and writes per hidden element of each residual branch when the row-parallel
bias, the dropout and the residual add run as three ops (Megatron-LM 2019 ``mpu/transformer.py``:
``output + bias``, ``dropout``, ``residual +``: read h + write h, read h + write h + a one-byte mask,
read 2h + write h = 7.5h) instead of the fused bias-dropout-add (read 2h, write h and the mask: 3h)
[derived, op by op]."""
EAGER_ROTARY_ELEMENTS = 10
"""2-byte element equivalents eager rotary embedding moves per query / key element (torchtitan
``apply_rotary_emb``: ``.float()`` read 2 + write 4, complex multiply read 4 + write 4, ``type_as``
read 4 + write 2 = 20 bytes); fused (compiled) it is part of the QKV epilogue. [derived, op by op]"""


def tp_all_reduce(cluster: ClusterSpec, cfg: LocalConfig, hidden_size: float) -> float:
    """One Megatron TP all-reduce (or all-gather + reduce-scatter pair under SP: same volume;
    Korthikanti et al. 2022 §4.2.2) of the b·s·h activation (Narayanan et al. 2021 §3.2)."""
    if cfg.tp == 1:
        return 0.0
    group = comm.place_group(cfg.tp, 1, cluster.gpus_per_node)
    return comm.all_reduce(cluster, group, cfg.tokens * hidden_size * ACT_BYTES)


def tp_comm(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec, gemm_s: float) -> tuple[float, float]:
    """(link, exposed) time of a block's TP collectives per micro-batch, in all-reduce equivalents
    ``a`` (an all-gather + reduce-scatter pair under SP moves the same bytes, Korthikanti et al. 2022
    §4.2.2): 2a forward and 2a backward (+2a forward again under full recompute), all exposed, unless
    the engine hides the column-parallel linears' backward collectives behind their GEMMs (Megatron,
    megatron/core/tensor_parallel/layers.py ``LinearWithGradAccumulationAndAsyncCommunication``:
    QKV's and FC1's input-gradient all-reduce, or reduce-scatter under SP, runs asynchronously while
    the weight-gradient GEMM runs; under SP the sharded input is re-gathered asynchronously during
    the input-gradient GEMM, one more ``a`` of link time). Each linear's hidden share is exposed only
    beyond its GEMM's time; the row-parallel linears' collectives stay on the critical path.
    With ``tp_comm_overlap`` (Transformer Engine userbuffers) every collective is chunked behind the
    block's ``gemm_s`` of GEMM time, except the first chunk of each (1/t of the pipelined ones; the
    re-gather is a bulk overlap).
    MLA's attention gathers its latents (:func:`_tp_input_width`, width ``w``) and reduces the h-wide
    output, so its all-reduce equivalent has the mean width ``(h + w) / 2`` and its column linears'
    input-gradient collective is ``w`` wide; ``a`` is the mean over the attention and the MLP (the
    hidden width for every other block, where this reduces to one ``a``)."""
    if cfg.tp == 1:
        return 0.0, 0.0
    h, w = layer.hidden_size, _tp_input_width(layer)
    a_mlp = tp_all_reduce(cluster, cfg, h)
    a = (tp_all_reduce(cluster, cfg, (h + w) / 2) + a_mlp) / 2
    columns = (tp_all_reduce(cluster, cfg, w), a_mlp)
    forward = (4 if cfg.recompute == "full" else 2) * a
    if cfg.tp_comm_overlap:
        regather = a if cfg.sp and cfg.terms is not None and cfg.terms.tp_async_backward else 0.0
        link = forward + 2 * a + regather
        return link, max(link - gemm_s, (forward + 2 * a) / cfg.tp)
    if cfg.terms is None or not cfg.terms.tp_async_backward:
        return forward + 2 * a, forward + 2 * a
    gemms = _column_gemm_times(layer, cfg, cluster)
    if cfg.sp:  # per column linear: re-gather (c/2) behind dgrad, reduce-scatter (c/2) behind wgrad
        return forward + 3 * a, forward + a + sum(2 * max(0.0, c / 2 - g) for c, g in zip(columns, gemms))
    return forward + 2 * a, forward + sum(max(0.0, c - g) for c, g in zip(columns, gemms))


def _column_gemm_times(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec) -> tuple[float, float]:
    """Forward GEMM time of the attention's and the MLP's column-parallel linears (QKV; FC1 or gate
    + up), which a backward GEMM of equal size mirrors; 0 for an MLP of experts (not in the list)."""
    groups: list[float] = [0.0]
    for n, k, _ in _projections(layer, cfg):
        if k == layer.hidden_size:
            groups[-1] += matmul_time(cluster, cfg.tokens, n, k, 1, cfg.fp8_speedup)
        elif groups[-1]:
            groups.append(0.0)
    groups += [0.0, 0.0]
    return groups[0], groups[1]


def transformer_cost(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec) -> LayerCost:
    """Cost of one transformer block: TP collectives (:func:`tp_comm`), CP ring exchanges, EP all-to-alls, ZeRO-3 gathers, activations per Korthikanti."""
    fwd, bwd, selective, attn = _transformer_compute(layer, cfg, cluster)
    h = layer.hidden_size
    recompute = {"none": 0.0, "selective": selective, "full": fwd}[cfg.recompute]
    tp_link, tp_exposed = tp_comm(layer, cfg, cluster, fwd + bwd - attn)
    cp_link, cp_exposed = _cp_comm(layer, cfg, cluster, attn)
    ep_link = _ep_comm(layer, cfg, cluster)
    local = _transformer_local_params(layer, cfg)
    z3_link, z3_exposed = _zero3_comm(local[0], cfg, cluster, fwd, bwd)
    act, work = block_activation_bytes(layer, cfg, [w for _, _, w in _projections(layer, cfg)], _feeds_residual(layer, cfg))
    links = {"tp": tp_link, "cp": cp_link, "ep": ep_link, "dp": z3_link}
    exposed = tp_exposed + cp_exposed + ep_link + z3_exposed
    hidden = (tp_link - tp_exposed) + (cp_link - cp_exposed) + (z3_link - z3_exposed)
    out = cfg.tokens * h * ACT_BYTES / cfg.sp_div
    again = recomputed_stored_bytes(layer, cfg, act)
    return LayerCost(fwd, bwd, recompute, links, exposed, hidden, act, work, local[0], local[1], out, again)


def _transformer_local_params(layer: TransformerLayer, cfg: LocalConfig) -> tuple[float, float]:
    """(all, expert) parameters on one GPU: weights split by TP, norms and row biases replicated,
    experts split by EP and by TP (expert-TP = TP, Megatron's default; by EP only where the engine runs
    them whole on every TP rank, ``EngineTerms.replicates_experts_over_tp``); MLA's down-projections and
    latent norms, and per-head q/k norms, replicated (:func:`costmodel.params.mla_replicated_params`)."""
    total = layer_params(layer)
    experts = expert_params(layer)
    n_norms = 3 if layer.cross_attention else 2
    replicated = n_norms * norm_params(layer.norm, layer.hidden_size)
    replicated += layer.hidden_size * (int(layer.out_bias) + int(layer.mlp_bias and not layer.is_moe))
    if layer.is_moe:
        replicated += layer.hidden_size * layer.num_experts
    replicated += mla_replicated_params(layer) + qk_norm_params(layer)
    dense = total - experts - replicated
    local_experts = experts / (cfg.ep * cfg.expert_tp)
    return dense / cfg.tp + replicated + local_experts, local_experts


def _cp_comm(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec, attn_s: float) -> tuple[float, float]:
    """Context parallelism's K/V exchange per layer and micro-batch, (link, exposed).

    Ring attention (Megatron ``cp_comm_type=p2p``): c−1 K/V chunk exchanges forward, twice that
    backward (K/V again and dK/dV), overlapped with the per-chunk attention (costmodel-notes 2.6.4).
    All-gather (torchtitan's ``context_parallel_rotate_method = "allgather"``, Megatron
    ``cp_comm_type=allgather``): the K/V of the whole sequence is gathered before the attention
    forward and again in backward, and dK/dV are reduce-scattered, none of it overlapped
    (costmodel-notes 2.6.4, "CP, all-gather")."""
    if cfg.cp == 1:
        return 0.0, 0.0
    kv_bytes = cfg.tokens * (layer.k_width + layer.v_width) / cfg.tp * ACT_BYTES  # MLA: up-projected K, V
    if cfg.terms is not None and cfg.terms.cp_all_gather:
        group = comm.place_group(cfg.cp, cfg.tp, cluster.gpus_per_node)
        gathered = cfg.cp * kv_bytes
        link = 2 * comm.all_gather(cluster, group, gathered) + comm.reduce_scatter(cluster, group, gathered)
        return link, link
    across = cfg.tp * cfg.cp > cluster.gpus_per_node
    link = 3 * (cfg.cp - 1) * comm.send_recv(cluster, kv_bytes, across)
    return link, max(0.0, link - attn_s)


def _ep_comm(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec) -> float:
    """MoE token dispatch and combine: 2 all-to-alls forward, 2 backward (+2 under full recompute,
    and under the native runtime's op-level selective recompute, which re-runs every op but the
    saved matmuls and attention: ``planner.runtime.recompute``, ``planner.runtime.expert_parallel``),
    each moving tokens·top_k·h bytes with (e−1)/e leaving the GPU (costmodel-notes 2.6.4); exposed."""
    if not layer.is_moe or cfg.ep == 1:
        return 0.0
    group = comm.place_group(cfg.ep, cfg.tp * cfg.cp, cluster.gpus_per_node)
    nbytes = cfg.tokens / cfg.sp_div * layer.moe_top_k * layer.hidden_size * ACT_BYTES
    native_sac = cfg.recompute == "selective" and cfg.terms is not None and cfg.terms.op_level_selective and cfg.terms.engine == "native"
    count = 4 + (2 if cfg.recompute == "full" or native_sac else 0)
    return count * comm.all_to_all(cluster, group, nbytes)


def _zero3_comm(params: float, cfg: LocalConfig, cluster: ClusterSpec, fwd: float, bwd: float) -> tuple[float, float]:
    """ZeRO-3 / FSDP per micro-batch: all-gather parameters forward and backward, reduce-scatter
    gradients (3Ψ, ZeRO paper §7), each prefetched behind the neighbouring layer's compute. Every
    collective (one per layer, or one per bucket) pays the ring latency, which grows with the group."""
    if cfg.zero3_group == 1:
        return 0.0, 0.0
    group = comm.place_group(cfg.zero3_group, cfg.tp, cluster.gpus_per_node)
    messages = math.ceil(params / cfg.zero3_bucket_params) if cfg.zero3_bucket_params else 1
    ag = comm.all_gather(cluster, group, params * ACT_BYTES, messages)
    rs = comm.reduce_scatter(cluster, group, params * cfg.grad_reduce_bytes, messages)
    if not cfg.zero3_overlap:
        return 2 * ag + rs, 2 * ag + rs
    exposed = max(0.0, ag - fwd) + max(0.0, ag + rs - bwd)
    return 2 * ag + rs, exposed
