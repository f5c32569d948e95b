"""Chunked attention (Llama 4's rotary layers): the keys per query the cost model counts equal the
ones transformers' own ``chunked_causal_mask_function`` allows, at meshplan's causal-half convention."""

from __future__ import annotations

import pytest
import torch

from costmodel.flops import CAUSAL_ATTENTION_FRACTION, attention_context
from costmodel.specs import TransformerLayer


@pytest.mark.parametrize("seq, chunk", [(1000, 256), (1024, 256), (200, 256)])
def test_chunked_context_equals_transformers_mask(seq: int, chunk: int) -> None:
    from transformers.masking_utils import chunked_causal_mask_function

    allow = chunked_causal_mask_function(chunk, torch.zeros(1, dtype=torch.long))
    q, kv = torch.arange(seq)[:, None], torch.arange(seq)[None, :]
    allowed = allow(0, 0, q, kv).float().sum() / seq  # mean keys per query, the diagonal included
    layer = TransformerLayer(hidden_size=64, num_heads=4, num_kv_heads=4, head_dim=16, ffn_hidden_size=128,
                             attention_chunk=chunk)
    # the mask keeps (c + 1) / 2 keys per query of a chunk of c, the convention c / 2: within 1 / c
    assert attention_context(layer, seq, CAUSAL_ATTENTION_FRACTION) == pytest.approx(float(allowed), rel=2.0 / min(seq, chunk))
