"""The attention layout of one traced block: full, sliding-window or chunked, read per layer.

Hybrid models set the layout layer by layer (Gemma 3: five sliding-window layers of 512 to one
global; Llama 4: 8,192-token chunks on three layers of four; gpt-oss: sliding 128 and full layers
alternating), so it is read from each block's own modules, never from the traced representative of
its repeat group (:func:`planner.intake.trace.units.module_signature` keeps layouts apart, so the
FLOPs traced for a global layer are a global layer's). What is read, first match wins, from the
block and its submodules in ``named_modules`` order:

1. A module with a ``config`` holding a ``layer_types`` list and an int ``layer_idx`` (transformers
   5: ``Gemma3Attention``, ``Llama4TextAttention``, ``GptOssAttention``, ``Qwen2Attention``):
   ``layer_types[layer_idx]`` is ``sliding_attention`` (window ``config.sliding_window``),
   ``chunked_attention`` (chunk ``config.attention_chunk_size``) or anything else (full).
2. A module's own ``sliding_window`` attribute (None there means full attention).
3. An attention module's ``config.sliding_window``, unless ``config.use_sliding_window`` is false
   (Mistral in transformers 5 passes the config's window at call time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn


@dataclass(frozen=True)
class AttentionLayout:
    """What keys a query of one layer may read, besides the causal mask."""

    sliding_window: int | None = None
    """Keys within this many positions (``TransformerLayer.sliding_window``)."""
    attention_chunk: int | None = None
    """Keys of the query's own chunk of this many tokens (``TransformerLayer.attention_chunk``)."""


FULL = AttentionLayout()


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _from_layer_types(module: nn.Module) -> AttentionLayout | None:
    """Rule 1 of the module docstring, or None when ``module`` does not state its layer type."""
    config, index = getattr(module, "config", None), getattr(module, "layer_idx", None)
    types = getattr(config, "layer_types", None) if config is not None else None
    if not isinstance(index, int) or isinstance(index, bool) or not isinstance(types, (list, tuple)) \
            or not 0 <= index < len(types):
        return None
    kind = types[index]
    if kind == "sliding_attention":
        return AttentionLayout(sliding_window=_positive(getattr(config, "sliding_window", None)))
    if kind == "chunked_attention":
        return AttentionLayout(attention_chunk=_positive(getattr(config, "attention_chunk_size", None)))
    return FULL


def module_layout(module: nn.Module) -> AttentionLayout | None:
    """The layout ``module`` itself states (rules 1 and 2), or None."""
    found = _from_layer_types(module)
    if found is not None:
        return found
    if "sliding_window" in vars(module):
        return AttentionLayout(sliding_window=_positive(vars(module)["sliding_window"]))
    return None


def config_window(attention: nn.Module) -> AttentionLayout:
    """Rule 3: the window of an attention module's config, when its config enables one."""
    config = getattr(attention, "config", None)
    if config is None or getattr(config, "use_sliding_window", True) is False:
        return FULL
    return AttentionLayout(sliding_window=_positive(getattr(config, "sliding_window", None)))


def block_layout(block: nn.Module, attention: nn.Module | None = None) -> AttentionLayout:
    """The layout of ``block`` (see the module docstring); ``attention`` is its self-attention
    module, whose config rule 3 reads."""
    for module in block.modules():
        found = module_layout(module)
        if found is not None:
            return found
    return config_window(attention) if attention is not None else FULL


def stated_layout(block: nn.Module) -> AttentionLayout | None:
    """The layout ``block`` states by rules 1 and 2 (part of its repeat signature), or None."""
    return next((found for m in block.modules() if (found := module_layout(m)) is not None), None)
