"""Cost of one transformer block for one micro-batch on one GPU (see ``costmodel.local``)."""

from __future__ import annotations

import math

from costmodel import comm
from costmodel.flops import CAUSAL_ATTENTION_FRACTION, attention_context, ffn_matrices
from costmodel.params import expert_params, layer_params, norm_params
from costmodel.kernels import attention_time, matmul_time, memory_time
from costmodel.local import ACT_BYTES, LayerCost, LocalConfig
from costmodel.memory import transformer_activation_bytes
from costmodel.specs import ClusterSpec, TransformerLayer


def _gemms_time(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec) -> float:
    """Forward time of a block's projections, by GEMM shape (m tokens, k in, n out), under TP's
    column (QKV, FC1) and row (out-projection, FC2) splits (Shoeybi et al. 2019 §3)."""
    t, h, m = cfg.tp, layer.hidden_size, cfg.tokens
    q, kv = layer.num_heads * layer.head_dim, layer.num_kv_heads * layer.head_dim
    up = (ffn_matrices(layer) - 1) * layer.ffn_hidden_size
    time = matmul_time(cluster, m, (q + 2 * kv) / t, h) + matmul_time(cluster, m, h, q / t)
    if layer.cross_attention:
        time += matmul_time(cluster, m, (2 * q + 2 * kv) / t, h) + matmul_time(cluster, m, h, q / t)
    if not layer.is_moe:
        return time + matmul_time(cluster, m, up / t, h) + matmul_time(cluster, m, h, layer.ffn_hidden_size / t)
    local = max(1, layer.num_experts // cfg.ep)
    routed = m * layer.moe_top_k * cfg.ep / layer.num_experts
    time += matmul_time(cluster, routed, up / t, h, local) + matmul_time(cluster, routed, h, layer.ffn_hidden_size / t, local)
    time += matmul_time(cluster, m, layer.num_experts, h)
    shared = layer.shared_expert_ffn_hidden_size
    if shared:
        time += matmul_time(cluster, m, (ffn_matrices(layer) - 1) * shared / t, h) + matmul_time(cluster, m, h, shared / t)
    return time


def _transformer_compute(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec) -> tuple[float, float, float, float]:
    """Forward, backward, selective-recompute and attention-core times of a block.

    Backward GEMMs cost 2x forward (dgrad + wgrad); FlashAttention backward 2.5x forward (it recomputes
    QKᵀ; costmodel-notes 2.3); eager attention executes the full s² (masking skips no work) as one
    batched GEMM over all heads, plus the softmax and dropout passes over the s x s scores.
    """
    t = cfg.tp
    gemms = _gemms_time(layer, cfg, cluster)
    frac = CAUSAL_ATTENTION_FRACTION if cfg.flash else 1.0
    core = 4.0 * cfg.tokens * attention_context(layer, cfg.seq_len, frac) * layer.num_heads * layer.head_dim / t
    if cfg.flash:
        d = layer.head_dim
        attn_f, attn_b = attention_time(cluster, core, d), attention_time(cluster, 2.5 * core, d)
        softmax_bytes = 0.0
    else:
        heads = layer.num_heads / t
        per_head = cfg.tokens / cfg.micro_batch
        attn_f = 2 * matmul_time(cluster, per_head, cfg.seq_len, layer.head_dim, heads * cfg.micro_batch)
        attn_b = 2 * attn_f
        drop = 2.5 if layer.dropout else 0.0
        softmax_bytes = (2.0 + drop) * ACT_BYTES * cfg.tokens * heads * cfg.seq_len
    mem_f = memory_time(cluster, _elementwise_bytes(layer, cfg) + softmax_bytes, kernels=6)
    fwd = gemms + attn_f + mem_f
    bwd = 2 * gemms + attn_b + 2 * mem_f
    selective = 0.0 if cfg.flash else attn_f + memory_time(cluster, softmax_bytes, kernels=2)
    return fwd, bwd, selective, attn_f + attn_b


def _elementwise_bytes(layer: TransformerLayer, cfg: LocalConfig) -> float:
    """HBM bytes of a block's memory-bound forward ops: 2 norms, 2 residual adds, dropouts (replicated
    across TP unless SP), and the activation function (split by TP). Element counts per token: norm
    2h each, residual add 3h each, dropout 2h each; GELU 2f, SwiGLU 3f (read gate and up, write)."""
    h = layer.hidden_size
    repl = 4 * h + 6 * h + (4 * h if layer.dropout else 0)
    act = (3 if layer.ffn_act == "swiglu" else 2) * layer.ffn_hidden_size * max(1, layer.moe_top_k)
    return ACT_BYTES * cfg.tokens * (repl / cfg.sp_div + act / cfg.tp)


def tp_all_reduce(cluster: ClusterSpec, cfg: LocalConfig, hidden_size: int) -> float:
    """One Megatron TP all-reduce (or all-gather + reduce-scatter pair under SP: same volume;
    Korthikanti et al. 2022 §4.2.2) of the b·s·h activation (Narayanan et al. 2021 §3.2)."""
    if cfg.tp == 1:
        return 0.0
    group = comm.place_group(cfg.tp, 1, cluster.gpus_per_node)
    return comm.all_reduce(cluster, group, cfg.tokens * hidden_size * ACT_BYTES)


def transformer_cost(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec) -> LayerCost:
    """Cost of one transformer block: 2 TP all-reduces forward and 2 backward (+2 under full
    recompute), CP ring exchanges, EP all-to-alls, ZeRO-3 gathers, activations per Korthikanti."""
    fwd, bwd, selective, attn = _transformer_compute(layer, cfg, cluster)
    h = layer.hidden_size
    recompute = {"none": 0.0, "selective": selective, "full": fwd}[cfg.recompute]
    tp_link = tp_all_reduce(cluster, cfg, h) * (4 + (2 if cfg.recompute == "full" else 0))
    tp_exposed = tp_link
    if cfg.tp_comm_overlap and cfg.tp > 1:
        tp_exposed = max(tp_link - (fwd + bwd - attn), tp_link / cfg.tp)
    cp_link, cp_exposed = _cp_comm(layer, cfg, cluster, attn)
    ep_link = _ep_comm(layer, cfg, cluster)
    local = _transformer_local_params(layer, cfg)
    z3_link, z3_exposed = _zero3_comm(local[0], cfg, cluster, fwd, bwd)
    act, work = transformer_activation_bytes(layer, cfg)
    links = {"tp": tp_link, "cp": cp_link, "ep": ep_link, "dp": z3_link}
    exposed = tp_exposed + cp_exposed + ep_link + z3_exposed
    hidden = (tp_link - tp_exposed) + (cp_link - cp_exposed) + (z3_link - z3_exposed)
    out = cfg.tokens * h * ACT_BYTES / cfg.sp_div
    return LayerCost(fwd, bwd, recompute, links, exposed, hidden, act, work, local[0], local[1], out)


def _transformer_local_params(layer: TransformerLayer, cfg: LocalConfig) -> tuple[float, float]:
    """(all, expert) parameters on one GPU: weights split by TP, norms and row biases replicated,
    experts split by EP and by TP (expert-TP = TP, Megatron's default)."""
    total = layer_params(layer)
    experts = expert_params(layer)
    n_norms = 3 if layer.cross_attention else 2
    replicated = n_norms * norm_params(layer.norm, layer.hidden_size)
    replicated += layer.hidden_size * (int(layer.out_bias) + int(layer.mlp_bias and not layer.is_moe))
    if layer.is_moe:
        replicated += layer.hidden_size * layer.num_experts
    dense = total - experts - replicated
    local_experts = experts / (cfg.ep * cfg.tp)
    return dense / cfg.tp + replicated + local_experts, local_experts


def _cp_comm(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec, attn_s: float) -> tuple[float, float]:
    """Ring attention (Megatron ``cp_comm_type=p2p``): c−1 K/V chunk exchanges forward, twice that
    backward (K/V again and dK/dV), overlapped with the per-chunk attention (costmodel-notes 2.6.4)."""
    if cfg.cp == 1:
        return 0.0, 0.0
    kv_bytes = 2 * cfg.tokens * layer.num_kv_heads * layer.head_dim / cfg.tp * ACT_BYTES
    across = cfg.tp * cfg.cp > cluster.gpus_per_node
    link = 3 * (cfg.cp - 1) * comm.send_recv(cluster, kv_bytes, across)
    return link, max(0.0, link - attn_s)


def _ep_comm(layer: TransformerLayer, cfg: LocalConfig, cluster: ClusterSpec) -> float:
    """MoE token dispatch and combine: 2 all-to-alls forward, 2 backward (+2 under full recompute),
    each moving tokens·top_k·h bytes with (e−1)/e leaving the GPU (costmodel-notes 2.6.4); exposed."""
    if not layer.is_moe or cfg.ep == 1:
        return 0.0
    group = comm.place_group(cfg.ep, cfg.tp * cfg.cp, cluster.gpus_per_node)
    nbytes = cfg.tokens / cfg.sp_div * layer.moe_top_k * layer.hidden_size * ACT_BYTES
    count = 4 + (2 if cfg.recompute == "full" else 0)
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
