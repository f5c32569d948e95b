"""Memory per GPU: model states under each sharding, activations per layer and per schedule.

Sources: ZeRO (Rajbhandari et al., SC'20, §5) for sharded model states; Megatron-LM
``theoretical_memory_usage.py`` and its distributed-optimizer table (18 B/param, 6 + 12/d with the
distributed optimizer, bf16 params with fp32 main grads); Korthikanti et al. 2022 ("Reducing
Activation Recomputation in Large Transformer Models", §4, Table 2) for activations.
"""

from __future__ import annotations

import numpy as np

from costmodel.local import ACT_BYTES, LocalConfig
from costmodel.specs import HeadLayer, ModelSpec, TransformerLayer

GIB = float(1 << 30)


def model_state_bytes(
    params: float, shard: int, zero: int, param_bytes: int, grad_bytes: int, optimizer_bytes: int
) -> tuple[float, float, float]:
    """(params, grads, optimizer states) bytes on one GPU for ``params`` local parameters.

    ZeRO stage 1 shards the optimizer states over the ``shard`` data-parallel ranks, stage 2 also the
    gradients, stage 3 also the parameters (ZeRO §5.1–5.3; with param 2, grad 2, optimizer 12 bytes:
    16Ψ, 4Ψ + 12Ψ/d, 2Ψ + 14Ψ/d, 16Ψ/d; Megatron's fp32 grads: 18Ψ and 6Ψ + 12Ψ/d).
    """
    p = params * param_bytes / (shard if zero >= 3 else 1)
    g = params * grad_bytes / (shard if zero >= 2 else 1)
    o = params * optimizer_bytes / (shard if zero >= 1 else 1)
    return p, g, o


def korthikanti_layer_bytes(s: int, b: int, h: int, a: int, t: int, sp: bool, recompute: str) -> float:
    """Activation bytes of one GPT layer (MHA, GELU f = 4h, dropout), Korthikanti et al. Table 2.

    none: s·b·h·(10 + 24/t + 5·a·s/(h·t)); SP divides the 10 by t too; selective drops the 5as/h
    term; full recompute stores only the 2·s·b·h layer input (÷t with SP).
    """
    sbh = s * b * h
    if recompute == "full":
        return 2.0 * sbh / (t if sp else 1)
    repl = 10.0 / (t if sp else 1)
    attn = 0.0 if recompute == "selective" else 5.0 * a * s / (h * t)
    return sbh * (repl + 24.0 / t + attn)


def transformer_activation_bytes(layer: TransformerLayer, cfg: LocalConfig) -> tuple[float, float]:
    """(stored, transient) activation bytes of a block for one micro-batch on one GPU.

    The generalisation of Korthikanti's bookkeeping in costmodel-notes 2.4.2: per token, replicated
    across TP unless SP: norm inputs 4h, QKV input 2h, FC1 input 2h, dropout masks 2h; split by TP:
    Q 2q, K and V 4kv, attention output 2q, MLP 4f (GELU) or 6f (SwiGLU), times top-k for MoE plus
    the permuted tokens 2h·k (a ReLU MLP 2f: :func:`mlp_bytes_per_ffn_element`). Eager attention without selective recompute adds 5·a·s per token
    (scores, softmax, dropout); FlashAttention stores its fp32 log-sum-exp (4·a per token). Full
    recompute stores the layer input and needs one layer's activations while it recomputes.
    Multi-head latent attention stores Q and K ``a·d_qk`` wide, V and the attention output ``a·d_v``
    wide, and its latents (:func:`mla_latent_bytes_per_token`).
    """
    h = layer.hidden_size
    k = max(1, layer.moe_top_k)
    repl = 4 * h + 2 * h + 2 * h + (2 * h if layer.dropout else 0) + mla_latent_bytes_per_token(layer)
    mlp = mlp_bytes_per_ffn_element(layer.ffn_act) * layer.ffn_hidden_size * k
    attention = 2 * layer.q_width + 2 * (layer.k_width + layer.v_width) + 2 * layer.o_width
    split = attention + (0 if layer.is_moe else mlp)
    if layer.cross_attention:
        split += attention
    if cfg.flash:
        split += 4 * layer.num_heads
    elif cfg.recompute == "none":
        split += 5 * layer.num_heads * cfg.seq_len
    full = cfg.tokens * (repl / cfg.sp_div + split / cfg.tp)
    if layer.is_moe:  # experts and permuted tokens: split as the experts are (LocalConfig.expert_tp)
        full += cfg.tokens * (mlp + 2 * h * k) / cfg.expert_tp
    if cfg.recompute == "full":
        return cfg.tokens * h * ACT_BYTES / cfg.sp_div, full
    return full, 0.0


def mlp_bytes_per_ffn_element(ffn_act: str) -> int:
    """Bytes an MLP keeps per token and FFN element: GELU keeps its input (FC1's output) and FC2 keeps
    GELU's output, 2 + 2 (Korthikanti et al. 2022, Table 2's 4sbh·f/h MLP terms); SwiGLU its fused
    4f input and the 2f product, 6; ReLU saves its own output (``threshold_backward(grad, result)``,
    torch ``tools/autograd/derivatives.yaml``), which is also FC2's saved input, so one 2-byte tensor:
    2; the squared ReLU (``relu2``) keeps that output for ``square``'s backward and the square for FC2,
    4 (measured with torch's saved-tensor hooks on the differential's traced custom block,
    ``tests/planner/runtime/custom_model.py``: 664 bytes per token and block at h 32, f 64 in bf16,
    the GELU bookkeeping's 784 less 2f = 128 plus the two LayerNorms' 8 bytes of statistics)."""
    return {"swiglu": 6, "relu": 2}.get(ffn_act, 4)


def mla_latent_bytes_per_token(layer: TransformerLayer) -> int:
    """Activation bytes per token (bf16) MLA keeps of its latents for backward, replicated across
    TP ranks and split by SP (Megatron-core ``multi_latent_attention.py``: the duplicated
    down-projections run on the rank's s/t tokens and the column-parallel up-projections gather
    their inputs): the query latent before and after its RMSNorm (2·d_c' + 2·d_c'), the key/value
    down-projection output (2·(d_c + d_h^R)) and the normalised key/value latent (2·d_c)
    (DeepSeek-V2 arXiv:2405.04434 §2.1.2 eqs. 9-12). 0 for a non-MLA block."""
    if not layer.is_mla:
        return 0
    return 4 * (layer.q_lora_rank or 0) + 4 * layer.kv_lora_rank + 2 * layer.qk_rope_head_dim


def in_flight_by_rank(schedule: str, pp: int, vpp: int, num_microbatches: int) -> np.ndarray:
    """:func:`in_flight_microbatches` of every rank 0..pp-1, as an array."""
    rank = np.arange(pp)
    m = num_microbatches
    if schedule == "gpipe":
        return np.full(pp, float(m))
    if schedule == "interleaved-1f1b" and vpp > 1:
        return np.minimum(m * vpp, 2 * (pp - rank - 1) + (vpp - 1) * pp + 1) / vpp
    return np.minimum(pp - rank, m).astype(float)


def in_flight_microbatches(schedule: str, rank: int, pp: int, vpp: int, num_microbatches: int) -> float:
    """Micro-batches whose activations a pipeline rank holds at its peak, in units of its whole stage.

    GPipe holds all m; 1F1B (and ZB-H1) min(p − rank, m) (Narayanan et al. 2021 §2.2.1); interleaved
    1F1B holds 2(p − rank − 1) + (v − 1)·p + 1 chunk-micro-batches of 1/v of the stage (Megatron
    ``schedules.py`` warm-up count), which for rank 0 is Korthikanti's p·(1 + (p − 1)/(p·v)).
    """
    m = num_microbatches
    if schedule == "gpipe":
        return float(m)
    if schedule == "interleaved-1f1b" and vpp > 1:
        chunks = min(m * vpp, 2 * (pp - rank - 1) + (vpp - 1) * pp + 1)
        return chunks / vpp
    return float(min(pp - rank, m))


def interleaved_held_act_bytes(chunk_act: tuple[float, ...], pp: int, rank: int, num_microbatches: int) -> float:
    """Largest activation bytes an interleaved-1F1B rank holds at a forward, its chunks storing
    ``chunk_act`` bytes per micro-batch each (chunk order): the warm-up's
    ``2 (pp - rank - 1) + (v - 1) pp + 1`` chunk forwards (:func:`in_flight_microbatches`), then the
    steady state's backward / forward pairs, forward ``i`` on chunk ``(i // pp) mod v`` and backward
    ``j`` on chunk ``v - 1 - (j // pp) mod v`` (Megatron-LM ``schedules.py``
    ``get_model_chunk_id``; torch's ``ScheduleInterleaved1F1B`` runs the same order). With chunks of
    one depth this is :func:`in_flight_microbatches` times a chunk; with unequal chunks (the embedding
    or head in the first or last) the deeper one can be in flight more often than its share. The held
    set repeats every ``pp v`` pairs, so the pairs past one period and the warm-up's length add nothing."""
    v, m = len(chunk_act), num_microbatches
    warm = min(m * v, 2 * (pp - rank - 1) + (v - 1) * pp + 1)
    held = sum(chunk_act[(i // pp) % v] for i in range(warm))
    peak = held
    for j in range(min(m * v - warm, warm + 2 * pp * v)):
        held += chunk_act[((warm + j) // pp) % v] - chunk_act[v - 1 - (j // pp) % v]
        peak = max(peak, held)
    return peak


def eager_block_extra_bytes(layer: TransformerLayer, cfg: LocalConfig) -> float:
    """Activation bytes an eager (uncompiled) PyTorch block stores beyond the fused-kernel bookkeeping
    of :func:`transformer_activation_bytes`, for one micro-batch on one GPU. Per token:

    - RMSNorm in fp32 (``torch.nn.RMSNorm``; torchtitan's ``RMSNorm._norm(x.float())``): autograd
      keeps the fp32 copy of the input and the fp32 normalised product (4h + 4h) where a fused
      kernel keeps the 2h input: +6h per norm (÷t under SP). LayerNorm is one ATen kernel
      (``native_layer_norm`` keeps its input and per-token statistics): +0.
    - Grouped-query attention with K and V repeated to every query head before SDPA (torchtitan
      ``repeat_kv``, ``planner.runtime.models.Attention``): SDPA keeps the repeated K and V, 4q
      instead of 4kv: +4(q − kv)/t.
    - SwiGLU as ``silu(gate(x)) * up(x)``: autograd keeps gate, silu(gate), up and their product
      (8f) where the fused SwiGLU keeps its 4f input and the 2f product (6f): +2f/t (×top-k).
    - The tanh GELU written op by op (``gelu_tanh``: transformers ``NewGELUActivation``, GPT-2):
      autograd keeps ``pow``'s input x, ``tanh``'s output, and both factors of the final product,
      ``0.5 x`` and ``1 + tanh(...)`` (8f), beside the down projection's input (2f), where one GELU
      kernel keeps its input and the projection's (4f): +6f/t. Measured with saved-tensor hooks on
      GPT-2 medium's block in bf16 (60.06h bytes per token at f = 4h, s = 1024, against 34.06h
      fused: this term and the attention output's contiguous copy, 2h).
    - transformers' GPT-2 attention (``TransformerLayer.conv1d``) hands ``c_proj`` a contiguous copy of
      SDPA's output (``attn_output.reshape(...).contiguous()``), which ``Conv1D``'s ``addmm`` saves
      beside the output SDPA keeps for its own backward: +2·q/t (the 2h above; check-memory on the
      GPT-2 cases of ``planner.runtime.memcheck.cases`` found 2.0h per token and block missing without it).
    - transformers' own blocks (``TransformerLayer.transformers_block``): ``LlamaRMSNorm`` and kin keep
      the fp32 input (shared by ``pow`` and the product) and the bf16 normalised tensor the weight
      multiplies (4h + 2h): +4h per norm; SDPA gets the grouped K/V with ``enable_gqa``: +0. Measured
      with saved-tensor hooks on transformers' Llama (h 256, 4 heads, 2 KV heads, s 2048, bf16 on CPU)
      against ``planner.runtime.models.Block`` of the same shape: 8.5h fewer bytes per token and block
      (2 norms x 2h, the repeated K/V 2h, and the per-block rotary cos/sin 2h, priced in neither).

    Measured on ``planner.runtime.models.Block`` with torch's saved-tensor hooks (Llama 3.1 8B shape,
    bf16: 28h + 8f + 4a bytes per token against 18h + 6f + 4a + 2kv·2 fused), on PyTorch's CPU
    dispatch, which ``meshplan check-memory`` runs; a CUDA build may route ``torch.rms_norm`` to a
    fused kernel that keeps only the bf16 input (then the norm term is an over-estimate).
    """
    h, q = layer.hidden_size, layer.num_heads * layer.head_dim
    kv = layer.num_kv_heads * layer.head_dim
    hf = layer.transformers_block
    norms = (3 if layer.cross_attention else 2) * ((4 if hf else 6) * h if layer.norm == "rmsnorm" else 0)
    act = {"swiglu": 2, "gelu_tanh": 6}.get(layer.ffn_act, 0) * layer.ffn_hidden_size * max(1, layer.moe_top_k)
    copy = 2 * q if layer.conv1d else 0
    split = (0 if hf else 4 * (q - kv)) + copy
    experts = cfg.expert_tp if layer.is_moe else cfg.tp
    return cfg.tokens * (norms / cfg.sp_div + split / cfg.tp + act / experts)



def sp_gathered_input_bytes(layer: TransformerLayer, cfg: LocalConfig) -> float:
    """Activation bytes a block keeps beyond :func:`transformer_activation_bytes` when sequence
    parallelism saves the all-gathered inputs of its column-parallel projections (DTensor TP, see
    ``costmodel.engines.EngineTerms.sp_saves_gathered_inputs``), for one micro-batch on one GPU:
    the QKV input and the FC1 (or router) input, 2h + 2h bf16 per token, kept whole instead of 1/t, i.e. ``4h·(1 − 1/t)`` per token (Korthikanti et al. 2022 Table 2's
    ``4sbh/t`` SP terms, undivided; a cross-attention block adds its K/V input, 2h). Measured on the runtime's Llama 3.1 8B block at tp 8 with torch's
    memory tracker: 10.75h bytes per token against 7.0h without this term."""
    if cfg.sp_div == 1:
        return 0.0
    h = layer.hidden_size
    inputs = 4 * h + (2 * h if layer.cross_attention else 0)
    return cfg.tokens * inputs * (1 - 1 / cfg.sp_div)


LOSS_SAVED_BYTES_PER_LOGIT = 4
"""What the cross-entropy keeps for its backward per logit: the fp32 ``log_softmax`` output
(PyTorch ``F.cross_entropy`` = ``log_softmax`` + ``nll_loss``; ``log_softmax_backward`` reads its
output) or the fp32 softmax (Megatron-LM ``_VocabParallelCrossEntropy.forward``,
``ctx.save_for_backward(exp_logits, ...)``)."""


def held_loss_bytes(model: ModelSpec, tokens: float, tp: int, schedule: str, rank: int, pp: int, flight: float,
                    per_logit: float = LOSS_SAVED_BYTES_PER_LOGIT) -> float:
    """Bytes of the losses a GPipe last stage holds beside the one it is back-propagating: every
    micro-batch's forward, loss included, runs before the first backward (Huang et al. 2019, GPipe
    §2.2), so the other ``m - 1`` keep their :data:`LOSS_SAVED_BYTES_PER_LOGIT` per logit
    (``tokens · V / t`` logits each) until their backward. 1F1B's last stage runs each micro-batch's
    backward right after its forward: nothing more than the one transient the head already counts.
    ``per_logit``: what a held loss keeps per logit (its bf16 logits too where the pipeline keeps them,
    ``costmodel.engines.EngineTerms.pp_keeps_logits``)."""
    if schedule != "gpipe" or pp == 1 or rank != pp - 1:
        return 0.0
    vocab = sum(x.vocab_size for x in model.layers if isinstance(x, HeadLayer))
    return max(flight - 1.0, 0.0) * tokens * vocab / tp * per_logit


def stranded_logit_bytes(model: ModelSpec, tokens: float, tp: int, rank: int, pp: int) -> float:
    """Bytes the caching allocator keeps reserved but unused at an eager loss's backward, on the
    pipeline rank holding the head: the block of the freed bf16 logits, ``ACT_BYTES`` per logit
    (``tokens · V / t`` logits).

    torchtitan's loss is ``F.cross_entropy(pred.flatten(0, 1).float(), labels)`` with ``del pred``
    before ``loss.backward()`` (torchtitan/train.py at the benchmark commit, trainer.py in 0.3.0): the
    forward holds the bf16 logits (2 B per logit), their fp32 copy (4) and ``log_softmax``'s fp32
    output (4); backward frees the bf16 logits and the fp32 copy, then allocates ``nll_loss``'s fp32
    gradient (4, into the fp32 copy's block) and ``log_softmax``'s fp32 input gradient (4) while the
    saved output is still held. PyTorch's caching allocator serves a request from the smallest cached
    free block at least as large and otherwise maps new memory, releasing cached blocks only when
    that fails (c10/cuda/CUDACachingAllocator.cpp, header comment); the bf16 block is half the size
    of the fp32 request, so it stays reserved beside the ``costmodel.engines.TORCH_LOGIT_WORK`` bytes
    at the step's largest transient, and again each step [assumption: nothing else is large enough
    to fill it then; not measured on a GPU]."""
    if rank != pp - 1:
        return 0.0
    vocab = sum(x.vocab_size for x in model.layers if isinstance(x, HeadLayer))
    return ACT_BYTES * tokens * vocab / tp
