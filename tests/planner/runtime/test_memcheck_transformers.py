"""The memory model against torch's tracker (``check-memory``) on transformers' own modules: fused
experts kept whole on every TP rank (``EngineTerms.replicates_experts_over_tp``), grouped K/V handed to
SDPA unrepeated and ``LlamaRMSNorm``'s saved tensors (``TransformerLayer.transformers_block``), FSDP2's
reduce outputs held to the end of a backward.

BUDGET: about 50 s on 2 cores (six one-rank or two-rank checks of 2-4 block models).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import planner
from planner.runtime.memcheck.check import RankMemory, check_memory

MIXTRAL = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 32, "intermediate_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": 128,
           "num_local_experts": 4, "num_experts_per_tok": 2, "max_position_embeddings": 64, "tie_word_embeddings": False}
"""The differential sweep's Mixtral (``tests/planner/runtime/differential_draw.py``)."""
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "intermediate_size": 344,
         "num_attention_heads": 4, "num_key_value_heads": 1, "num_hidden_layers": 2, "vocab_size": 128,
         "max_position_embeddings": 1024, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
"""A Llama whose blocks, not its 128-token vocabulary, hold the activations (GQA: 4 heads, 1 KV head)."""
KIB = 2**20  # KiB per GiB


def _check(tmp_path: Path, name: str, config: dict, gpus: int = 1, **settings: object) -> RankMemory:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config))
    plan = planner.config_plan(model=str(path), cluster="dgx-a100", gpus=gpus, pp=1, **settings)
    return check_memory(plan, model=str(path)).ranks[0]


def test_mixtral_experts_are_priced_whole_on_each_tp_rank(tmp_path: Path) -> None:
    """At tp 2 the runtime keeps all four experts on both ranks: 6 B of parameters and 8 B of Adam
    states per expert parameter, which pricing them split over tp halves (352.7 against 640.7 KiB)."""
    rank = _check(tmp_path, "mixtral", MIXTRAL, gpus=2, tp=2, micro_batch=8, global_batch=8, seq_len=64)
    for term in ("params", "optimizer_states"):
        assert rank.predicted_gib[term] == pytest.approx(rank.measured_gib[term], rel=0.01), term
    # the predicted activations hold the peak's transient too (the experts' combine backward), which torch books as temporaries
    held = rank.measured_gib["activations"] + rank.measured_gib["temporaries"]
    assert rank.predicted_gib["activations"] == pytest.approx(held, rel=0.05)


def test_transformers_llama_block_activations(tmp_path: Path) -> None:
    """Per block (the 4-block model less the 2-block one), transformers' Llama stores what the model
    prices within 3 %; and a query-head-wide K/V (MHA) adds exactly the K and V of the extra heads,
    4(q - kv) bytes per token, since SDPA gets the grouped K/V unrepeated (``enable_gqa``)."""
    run = dict(tp=1, micro_batch=1, global_batch=1, seq_len=1024)
    two = _check(tmp_path, "two", LLAMA, **run)
    four = _check(tmp_path, "four", {**LLAMA, "num_hidden_layers": 4}, **run)
    mha = _check(tmp_path, "mha", {**LLAMA, "num_key_value_heads": 4}, **run)

    def act(r: RankMemory, side: str) -> float:
        return getattr(r, f"{side}_gib")["activations"] * KIB

    slope = {side: act(four, side) - act(two, side) for side in ("measured", "predicted")}
    assert slope["predicted"] == pytest.approx(slope["measured"], rel=0.03)
    extra_kv = 2 * 1024 * 4 * (128 - 32) / 1024  # two blocks x 1024 tokens x 4(q - kv) bytes, in KiB
    assert act(mha, "measured") - act(two, "measured") == pytest.approx(extra_kv, rel=0.02)
    assert act(mha, "predicted") - act(two, "predicted") == pytest.approx(extra_kv, rel=0.02)


def test_reduce_outputs_held_to_the_end_of_the_backward(tmp_path: Path) -> None:
    """The differential sweep's Mixtral at tp 2, ZeRO 3, eight micro-batches of one: from the second
    micro-batch on FSDP2 keeps each block's fp32 reduce output until the backward ends
    (``costmodel.rank_memory._backward_end_bytes``), which the peak holds beside the gradients
    (-11.4 % without them)."""
    rank = _check(tmp_path, "mixtral", MIXTRAL, gpus=2, tp=2, zero=3, sp=True, micro_batch=1, global_batch=8, seq_len=16,
                  recompute="full")
    assert -0.03 <= rank.error <= 0.10
    assert rank.measured_gib["temporaries"] >= rank.measured_gib["grads"]  # the reduce outputs, as many bytes
