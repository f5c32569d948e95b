"""Small models for sweep tests: Llama-style ``config.json`` files whose searches take about a second."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TINY = {
    "model_type": "llama", "hidden_size": 256, "intermediate_size": 768, "num_attention_heads": 4,
    "num_key_value_heads": 4, "num_hidden_layers": 4, "vocab_size": 8000, "max_position_embeddings": 4096,
    "tie_word_embeddings": False, "hidden_act": "silu", "rms_norm_eps": 1e-5,
}
SMALL = {**TINY, "hidden_size": 1024, "intermediate_size": 3072, "num_attention_heads": 8, "num_key_value_heads": 8}
"""Big enough that the step time grows with the batch (a 0.14 s fixed cost does not dominate)."""

GRID = dict(cluster="dgx-h100,dgx-a100", gpus="8,16", global_batch="16", seq_len=1024, tokens="20B", price_per_gpu_hour="3.0,1.5")


def write_config(folder: Path, config: dict) -> str:
    path = folder / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Path of a 4-block, 256-wide Llama-style config.json."""
    return write_config(tmp_path_factory.mktemp("tiny"), TINY)


@pytest.fixture(scope="session")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Path of a 4-block, 1024-wide Llama-style config.json."""
    return write_config(tmp_path_factory.mktemp("small"), SMALL)


@pytest.fixture(scope="session")
def tiny_sweep(tiny_model: str):
    """Two clusters x two GPU counts of the tiny model, with a budget and prices, serially."""
    from planner.capacity.api import sweep

    return sweep(model=tiny_model, **GRID)
