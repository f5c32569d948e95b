"""Activation memory as each engine's autograd keeps it: the engine-independent bookkeeping of
``costmodel.memory`` (Korthikanti et al. 2022, generalised), adjusted for torchtitan's op-level
selective checkpointing (eager: every saved matmul output cached; compiled: only those backward
reads), eager (uncompiled) fp32 norm intermediates, and FP8 GEMM inputs kept in FP8 by Transformer
Engine."""

from __future__ import annotations

from dataclasses import replace

from costmodel.cp_memory import cp_gathered_kv_bytes
from costmodel.engines import sac_saved_matmuls
from costmodel.local import ACT_BYTES, LocalConfig
from costmodel.memory import eager_block_extra_bytes, sp_gathered_input_bytes, transformer_activation_bytes
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
    if terms.op_level_selective and cfg.recompute == "selective" and not layer.is_moe:
        full, _ = transformer_activation_bytes(layer, replace(cfg, recompute="none"))
        residual = feeds_residual if feeds_residual is not None else [False] * len(mm_widths)
        saved = sac_saved_bytes_per_token(mm_widths, residual, terms.sac_caches_unread_outputs)
        per_token = ACT_BYTES * (h / cfg.sp_div + layer.o_width / cfg.tp) + saved + LSE_BYTES_PER_HEAD * layer.num_heads / cfg.tp
        return cfg.tokens * per_token, full + eager
    if cfg.fp8 and terms.fp8_saves_fp8_inputs and cfg.recompute != "full":
        o, f = layer.o_width, layer.ffn_hidden_size * max(1, layer.moe_top_k)
        stored -= cfg.tokens * (2 * h / cfg.sp_div + (o + f) / cfg.tp)
    if cfg.recompute == "full":
        return stored, work + eager
    return stored + eager, work


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
