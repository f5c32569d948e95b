"""Blocks found by their traced attention call, and generic layers that the estimate names (issue 12)."""

from __future__ import annotations

import pytest

import planner
from costmodel.specs import TransformerLayer
from planner.errors import InputError
from planner.intake.trace import model_from_factory

RUN = dict(cluster="dgx-a100", gpus=16, global_batch=32, seq_len=256, tp=2, pp=2)


def test_attention_in_a_helper_method_is_still_a_transformer_block(zoo, factory) -> None:
    spec = model_from_factory(factory("helper_gpt"), seq_len=256)
    assert [x.kind for x in spec.layers] == ["embedding", *["transformer"] * 3, "norm", "head"]
    block = spec.layers[1]
    g = zoo.GPT
    assert (block.num_heads, block.head_dim, block.ffn_hidden_size) == (g["heads"], g["hidden"] // g["heads"], 4 * g["hidden"])
    assert block.qkv_bias and block.causal and spec.layers[0].max_positions == g["positions"]
    assert spec.notes == ()


def test_the_same_model_with_named_attention_estimates_the_same(factory) -> None:
    helper = planner.estimate(model=model_from_factory(factory("helper_gpt"), seq_len=256), **RUN)
    named = model_from_factory(factory("gpt"), seq_len=256)
    untied = named.model_copy(update={"tied_embeddings": False, "layers": tuple(
        x.model_copy(update={"tied": False}) if x.kind == "head" else x for x in named.layers)})
    reference = planner.estimate(model=untied, **RUN)
    assert helper.step_time_s == pytest.approx(reference.step_time_s, rel=1e-9)
    assert helper.peak_memory_gib == pytest.approx(reference.peak_memory_gib, rel=1e-9)


def test_an_unrecognised_block_is_named_in_the_assumptions_with_its_reason(factory) -> None:
    spec = model_from_factory(factory("odd_gpt"), seq_len=256)
    assert not any(isinstance(x, TransformerLayer) for x in spec.layers)
    note = next(n for n in spec.notes if "blocks.*" in n)
    assert "(x3) planned as a generic layer" in note and "not a plain, gated or fused gate-up MLP" in note
    result = planner.estimate(model=spec, **RUN)
    assert note in result.assumptions
    assert result.time_breakdown_s.compute > 0


def test_models_without_a_sequence_get_neither_sp_nor_cp(factory) -> None:
    spec = model_from_factory(factory("dlrm"))
    assert not spec.has_sequence
    default = planner.estimate(model=spec, cluster="dgx-h100", gpus=16, global_batch=1024, seq_len=1, tp=2, zero=3)
    assert default.config["sp"] is False
    with pytest.raises(InputError, match="need a sequence to split"):
        planner.estimate(model=spec, cluster="dgx-h100", gpus=16, global_batch=1024, seq_len=1, tp=2, sp=True, zero=3)
    plan = planner.plan(model=spec, cluster="dgx-h100", gpus=16, global_batch=1024, seq_len=1, top_k=3)
    for mesh in [plan.mesh, *(a.mesh for a in plan.alternatives if hasattr(a, "mesh"))]:
        assert not mesh.sp and mesh.cp == 1
