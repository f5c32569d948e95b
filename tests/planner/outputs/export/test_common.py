"""What every export shares: the model behind a plan, the chunks, the error, the dispatcher."""

from __future__ import annotations

import pytest

from planner.errors import InputError
from planner.outputs.export import check_model_for, engine_export, export, render
from planner.plans.engines.common import UnsupportedPlanError, chunks, resolve_plan_model, uniform_recompute


def test_resolve_plan_model_checks_the_layer_list(plan_of) -> None:
    plan = plan_of(tp=2, dp=8, sp=True, global_batch=64, seq_len=4096)
    assert [x.name for x in resolve_plan_model(plan).layers] == plan.model.layer_names
    other = plan.model_copy(update={"model": plan.model.model_copy(update={"layer_names": plan.model.layer_names[:-1], "num_layers": 34})})
    with pytest.raises(InputError, match="changed since planning"):
        resolve_plan_model(other)


def test_chunks_follow_stage_index_and_find_blocks(plan_of) -> None:
    plan = plan_of(tp=1, pp=2, dp=8, vpp=2, schedule="interleaved-1f1b", global_batch=64, seq_len=4096, recompute="full")
    parts = chunks(plan, resolve_plan_model(plan))
    assert [c.index for c in parts] == [0, 1, 2, 3]
    assert sum(len(c.blocks) for c in parts) == 32 and 0 not in parts[0].blocks
    assert all(set(c.block_recompute) == {"full"} for c in parts)
    assert uniform_recompute(plan, "torchtitan", parts) == "full"


def test_error_is_bad_input_naming_target_and_field() -> None:
    err = UnsupportedPlanError("deepspeed", "mesh.zero", "zero 2 with pipelining")
    assert isinstance(err, InputError)
    assert str(err) == "cannot export to deepspeed: mesh.zero: zero 2 with pipelining" and err.field == "mesh.zero"


def test_unknown_target_and_format(plan_of) -> None:
    plan = plan_of(tp=2, dp=8, sp=True, global_batch=64, seq_len=4096)
    with pytest.raises(InputError, match="unknown export target"):
        export(plan, "nemo")
    with pytest.raises(InputError, match="unknown export format"):
        render(plan, "megatron", "yaml")  # type: ignore[arg-type]


def test_models_the_engines_cannot_build_are_refused(plan_of) -> None:
    plan = plan_of(model="gpt3-175b", cluster="dgx-a100", tp=8, pp=8, dp=2, sp=True, zero=1, global_batch=64, seq_len=2048)
    spec = resolve_plan_model(plan)
    headless = spec.model_copy(update={"layers": spec.layers[:-1]})
    for target in ("megatron", "torchtitan"):
        with pytest.raises(UnsupportedPlanError, match=r"model\.layers\[\d+\]"):
            engine_export(plan, target, headless)  # the exporter itself refuses it
        with pytest.raises(UnsupportedPlanError, match=r"model\.layers\[\d+\]"):
            check_model_for(target, headless)  # and planning for the target refuses it before searching
        with pytest.raises(InputError, match="the plan was made for another model"):
            export(plan, target, headless)  # export checks the plan against the model first
