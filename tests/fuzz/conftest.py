"""Fixtures of the fuzz suite; the helpers live in ``fuzzkit`` (this folder is put on sys.path)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fuzzkit import valid_plan_dict  # noqa: E402



@pytest.fixture(scope="session", autouse=True)
def _torch_loaded() -> None:
    """Import torch once before the cases: its first import (seconds) is start-up, not a refusal's time."""
    import torch  # noqa: F401


@pytest.fixture(scope="session")
def good_plan() -> dict[str, Any]:
    """The valid plan as a JSON dict (copy it before changing it)."""
    return valid_plan_dict()


@pytest.fixture(scope="session")
def good_plan_file(tmp_path_factory, good_plan) -> Path:
    """The valid plan written to a file."""
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(json.dumps(good_plan, indent=2), encoding="utf-8")
    return path


TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "intermediate_size": 344,
    "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": 1024,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
}
"""The model of ``meshplan run``'s record in ``data/run_record.json`` (its ``model.arg`` is ``tiny/config.json``)."""
CPU_CLUSTER = {
    "gpu": {"name": "cpu-test", "peak_bf16_tflops": 0.08, "hbm_gib": 8.0, "hbm_bandwidth_gbps": 30.0},
    "gpus_per_node": 4, "intra_node_bandwidth_gbps": 2.0, "network_bandwidth_gbps": 2.0,
    "intra_node_latency_us": 30.0, "network_latency_us": 30.0, "runtime_overhead_gib": 0.3,
    "efficiency": {"gemm_max": 0.8, "gemm_half_gflop": 0.001, "attention": 0.1, "memory": 0.6, "kernel_overhead_us": 6.0,
                   "intra_node": 0.6, "network": 0.6, "step_fixed_s": 0.002, "overlap_slowdown": 0.1},
}
"""The cluster that record ran on (``cpu.json``)."""


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """A folder with ``tiny/config.json``, ``cpu.json`` and ``record.json`` (a ``meshplan run -o`` record)."""
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "tiny").mkdir()
    (folder / "tiny" / "config.json").write_text(json.dumps(TINY_LLAMA), encoding="utf-8")
    (folder / "cpu.json").write_text(json.dumps(CPU_CLUSTER), encoding="utf-8")
    record = json.loads((Path(__file__).parent / "data" / "run_record.json").read_text(encoding="utf-8"))
    record["model"]["arg"] = record["plan"]["model_arg"] = str(folder / "tiny" / "config.json")
    (folder / "record.json").write_text(json.dumps(record), encoding="utf-8")
    return folder
