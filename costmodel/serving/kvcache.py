"""KV cache: bytes per token on each GPU, paged block rounding, and how many sequences fit.

Sources: the per-token size 2·L·n_kv·d_head·bytes (Pope et al., "Efficiently Scaling Transformer
Inference", MLSys'23, §2.1; Llama 3.1 70B bf16: 320 KiB per token); PagedAttention's fixed-size
blocks (Kwon et al., SOSP'23, §4.1: a sequence holds ceil(tokens / block) blocks); MLA's compressed
cache (DeepSeek-V2 arXiv:2405.04434 §2.1.2: d_c + d_h^R = 576 elements per token and layer, held
whole by every TP rank, vLLM ``MLACommonImpl``); sliding windows and chunked attention keep at most
the window (Mistral 7B arXiv:2310.06825 §2, rolling buffer cache).
"""

from __future__ import annotations

import math

from costmodel.serving.shape import BlockShape, ModelShape
from costmodel.serving.specs import Instance


def kv_heads_per_gpu(block: BlockShape, instance: Instance) -> float:
    """Share of a block's KV heads one GPU stores for each of its sequences: all of them under
    attention DP or MLA, n_kv / tp under TP, and one whole head when tp exceeds n_kv (vLLM and
    TensorRT-LLM replicate KV heads across the extra ranks)."""
    n_kv = block.layer.num_kv_heads
    if instance.attention_dp or block.layer.is_mla:
        return float(n_kv)
    return max(1.0, n_kv / instance.tp)


def block_kv_bytes_per_token(block: BlockShape, instance: Instance, kv_element_bytes: float) -> float:
    """KV bytes one token of one sequence leaves in one block on one GPU holding it."""
    share = kv_heads_per_gpu(block, instance) / block.layer.num_kv_heads
    return block.kv_elements_per_token * share * kv_element_bytes


def kv_bytes_per_token(shape: ModelShape, instance: Instance, kv_element_bytes: float,
                       context: float | None = None) -> float:
    """KV bytes one token of one sequence occupies on one GPU of a pipeline stage (blocks spread over
    pp stages). With ``context`` (the sequence's length), windowed blocks count only their window,
    spread over the sequence's tokens."""
    total = 0.0
    for block in shape.blocks:
        per_token = block_kv_bytes_per_token(block, instance, kv_element_bytes) * block.count
        if context and block.window and context > block.window:
            per_token *= block.window / context
        total += per_token
    return total / instance.pp


def sequence_tokens(tokens: float, block_tokens: int) -> int:
    """Tokens a sequence reserves once its last block is allocated (PagedAttention, Kwon et al. SOSP'23 §4.1)."""
    return int(math.ceil(max(tokens, 1.0) / block_tokens) * block_tokens)


def max_sequences(capacity_bytes: float, per_token_bytes: float, tokens: int, seqs_per_gpu: float) -> int:
    """Sequences the instance holds at once: blocks of ``tokens`` each fill ``capacity_bytes`` per GPU;
    ``seqs_per_gpu`` is how many GPUs' caches a sequence spans the inverse of (tp under attention DP,
    where each GPU holds its own sequences whole; 1 otherwise)."""
    if capacity_bytes <= 0 or per_token_bytes <= 0:
        return 0
    return int(capacity_bytes // (per_token_bytes * tokens) * seqs_per_gpu)
