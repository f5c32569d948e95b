"""The small shared pieces of the spec types (``costmodel.specs``): the frozen-model configuration and
the literal choices a model, a cluster and a configuration name."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict

FROZEN = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
"""Every spec type is a frozen pydantic model that refuses unknown fields and documents each field
where it is declared."""

FfnAct = Literal["gelu", "gelu_tanh", "swiglu", "relu", "relu2"]
"""The MLP's activation: ``gelu`` is one kernel (``F.gelu``, Megatron's fused bias-GELU);
``gelu_tanh`` is the tanh-approximated GELU written op by op in Python (transformers'
``NewGELUActivation``, ``activation_function: gelu_new`` of GPT-2), whose intermediates autograd keeps
(``costmodel.memory.eager_block_extra_bytes``) and whose ops each stream the tensor
(``costmodel.layer_transformer.EAGER_GELU_TANH_ELEMENTS``); ``relu2`` is the squared ReLU
(So et al. 2021, Primer; transformers' ``ReLUSquaredActivation``, ``hidden_act: relu2``), which keeps
ReLU's output and the square's (``costmodel.memory.mlp_bytes_per_ffn_element``)."""
NormKind = Literal["layernorm", "rmsnorm"]
Recompute = Literal["none", "selective", "full"]
Schedule = Literal["1f1b", "interleaved-1f1b", "gpipe", "zb-h1"]
AttentionImpl = Literal["flash", "eager"]
Engine = Literal["native", "megatron", "torchtitan", "deepspeed"]
"""The training engine whose behaviour the estimate models (``costmodel.engines``); ``native`` is
meshplan's idealised engine (Megatron-like, every overlap where the configuration allows it)."""
Precision = Literal["bf16", "fp8"]
"""GEMM precision: bf16, or FP8 GEMMs with bf16 elsewhere (``costmodel.precision``)."""
