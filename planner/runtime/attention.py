"""The causal attention call of the runtime's own decoder, in one small function that can be swapped.

:func:`causal_attention` is ``torch.nn.functional.scaled_dot_product_attention(q, k, v,
is_causal=True)``: no S x S mask is built; SDPA picks FlashAttention-2, cuDNN or memory-efficient
attention on CUDA (bf16 inputs, ``torch.nn.attention.SDPBackend``) and its fused flash kernel on CPU.
Context parallelism may replace it with a ring attention of the same signature. Hugging Face models
are built with ``attn_implementation="sdpa"`` (``planner.runtime.models``), which calls the same
function with ``is_causal`` on the causal path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal scaled dot-product attention of (batch, heads, seq, head_dim) tensors (SDPA, ``is_causal=True``)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def attention_backend(module: nn.Module, device: torch.device) -> str:
    """What the run record says about attention: the call, and the SDPA kernels it may use on ``device``."""
    config = getattr(module, "config", None)
    impl = getattr(config, "_attn_implementation", None) if config is not None else None
    call = f"transformers attn_implementation={impl}" if impl else "sdpa is_causal=True"
    if device.type != "cuda":
        return f"{call} (CPU fused flash kernel)"
    cuda = torch.backends.cuda
    kernels = [name for name, on in (("flash", cuda.flash_sdp_enabled()), ("cudnn", cuda.cudnn_sdp_enabled()),
                                     ("efficient", cuda.mem_efficient_sdp_enabled())) if on]
    return f"{call} ({', '.join(kernels) or 'math'} enabled)"
