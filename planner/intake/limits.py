"""The largest model meshplan reads: bounds that every model reader (presets, config files, traces) applies."""

from __future__ import annotations

from typing import Any

MAX_LAYERS = 100_000
"""Most layers a model may have."""
MAX_SIZE = 2**31
"""Largest width, vocabulary, head or expert count of a layer (any real model is far below)."""
MAX_PARAMS = 2**50
"""Largest parameter count of one traced layer: recommender embedding tables reach 2^40 (DLRM-scale
tables of 10^12 rows x dims), far beyond any width."""
MAX_PER_TOKEN = 1e18
"""Largest per-token FLOP or byte total of a traced layer."""

CONFIG_SIZES = ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size", "num_hidden_layers")
"""Hugging Face config keys that, when present, must be positive integers within bounds before a
model is built from the config (``--trace``): transformers divides by them or allocates by them."""


def config_size_problems(raw: dict[str, Any]) -> list[str]:
    """A clause for every key of :data:`CONFIG_SIZES` in ``raw`` that is not an integer in 1..bound
    (:data:`MAX_LAYERS` for ``num_hidden_layers``, :data:`MAX_SIZE` for the rest)."""
    out = []
    for key in CONFIG_SIZES:
        if key not in raw or raw[key] is None:
            continue
        value, most = raw[key], MAX_LAYERS if key == "num_hidden_layers" else MAX_SIZE
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= most:
            out.append(f"{key} must be a positive integer of at most {most:,}, got {value!r:.40}")
    return out
