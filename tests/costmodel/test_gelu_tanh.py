"""GPT-2's tanh GELU written op by op (transformers ``NewGELUActivation``, ``ffn_act="gelu_tanh"``):
the eager activation term (``costmodel.memory.eager_block_extra_bytes``) is what autograd keeps for
transformers' own GPT-2 MLP, and the eager time term streams each of its ops."""

from __future__ import annotations

import pytest

from costmodel.local import LocalConfig
from costmodel.memory import eager_block_extra_bytes, transformer_activation_bytes
from costmodel.specs import TransformerLayer

H, F, SEQ = 1024, 4096, 512


def _layer(act: str) -> TransformerLayer:
    return TransformerLayer(hidden_size=H, num_heads=16, num_kv_heads=16, head_dim=64, ffn_hidden_size=F, ffn_act=act)


def _cfg() -> LocalConfig:
    return LocalConfig(micro_batch=1, seq_len=SEQ, tp=1, cp=1, ep=1, sp=False, recompute="none", flash=True, zero3_group=1)


def test_gpt2_mlp_keeps_what_the_eager_term_says() -> None:
    """transformers' GPT2MLP (c_fc, NewGELUActivation, c_proj; dropout off) in bf16 keeps the c_fc
    input (2h) and, per FFN element, ``pow``'s input, ``tanh``'s output, ``0.5 x``, ``1 + tanh`` and
    the c_proj input (10f): the fused MLP's 4f plus the eager term's 6f."""
    import torch
    import transformers
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers.models.gpt2.modeling_gpt2 import GPT2MLP

    config = transformers.GPT2Config(n_embd=H, n_inner=F, activation_function="gelu_new", resid_pdrop=0.0)
    with FakeTensorMode():
        mlp = GPT2MLP(F, config)
        for p in mlp.parameters():
            p.data = p.data.to(torch.bfloat16)
        params = {id(p.untyped_storage()) for p in mlp.parameters()}
        saved: dict[int, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            if id(t.untyped_storage()) not in params:
                saved.setdefault(id(t.untyped_storage()), t.untyped_storage().nbytes())
            return t

        x = torch.empty(1, SEQ, H, dtype=torch.bfloat16, requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            mlp(x)
    fused_mlp = SEQ * (2 * H + 4 * F)  # FC1 input (2h, replicated) and Korthikanti's 4f
    extra = eager_block_extra_bytes(_layer("gelu_tanh"), _cfg())
    assert sum(saved.values()) == fused_mlp + extra
    assert eager_block_extra_bytes(_layer("gelu"), _cfg()) == 0.0  # one GELU kernel keeps its input only
    assert transformer_activation_bytes(_layer("gelu_tanh"), _cfg()) == transformer_activation_bytes(_layer("gelu"), _cfg())


def test_op_by_op_gelu_streams_every_op() -> None:
    from costmodel.engines import engine_terms
    from costmodel.layer_transformer import EAGER_GELU_TANH_ELEMENTS, _elementwise_bytes
    from costmodel.specs import ParallelConfig

    eager = LocalConfig(**{**_cfg().__dict__, "terms": engine_terms(ParallelConfig(global_batch=1, seq_len=SEQ))})
    diff = _elementwise_bytes(_layer("gelu_tanh"), eager) - _elementwise_bytes(_layer("gelu"), eager)
    assert diff == 2 * SEQ * (EAGER_GELU_TANH_ELEMENTS - 2) * F  # bf16, against the one kernel's read and write
