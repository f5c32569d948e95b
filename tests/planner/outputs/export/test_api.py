"""The launcher API: ``planner.load_plan`` and the Plan methods."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import planner
from planner.plans.engines.deepspeed import DeepSpeedExport
from planner.plans.engines.torchtitan import TorchtitanExport


def test_load_plan_round_trips(plan_of, tmp_plan) -> None:
    plan = plan_of(tp=2, pp=2, dp=4, sp=True, zero=1, global_batch=64, seq_len=4096)
    loaded = planner.load_plan(tmp_plan(plan))
    assert loaded == plan and loaded.to_json() == plan.to_json()


def test_load_plan_refuses_unknown_schema_versions(plan_of, tmp_path: Path) -> None:
    data = json.loads(plan_of(tp=2, dp=8, sp=True, global_batch=64, seq_len=4096).to_json())
    data["schema_version"] = "9.9"
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    with pytest.raises(planner.InputError, match=r"schema_version '9.9'.*regenerate"):
        planner.load_plan(str(path))


def test_plan_methods(plan_of) -> None:
    plan = plan_of(tp=1, pp=2, dp=8, zero=0, global_batch=64, seq_len=2048, recompute="full")
    assert isinstance(planner.export(plan, "megatron").argv(), list) and isinstance(dict(planner.export(plan, "megatron").groups), dict)
    assert isinstance(planner.export(plan, "torchtitan"), TorchtitanExport) and isinstance(planner.export(plan, "deepspeed"), DeepSpeedExport)
    assert planner.report(plan).startswith("# meshplan report") and planner.report(plan, "html").startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("target", ["megatron", "torchtitan", "deepspeed"])
def test_a_tampered_in_memory_plan_is_refused_never_exported(plan_of, target: str) -> None:
    from planner.outputs.export import export, render

    plan = plan_of(tp=1, pp=2, dp=8, zero=0, global_batch=64, seq_len=2048, recompute="full")
    export(plan, target)  # the plan as written exports to every target
    more_gpus = plan.model_copy(update={"mesh": plan.mesh.model_copy(update={"dp": 16})})
    first, second = plan.stages
    dropped = plan.model_copy(update={"stages": [first, second.model_copy(update={"layers": second.layers[:-1]})]})
    for bad, why in ((more_gpus, "mesh.dp is 16 but the configuration says 8"), (dropped, "the stages cover layers 0..33")):
        with pytest.raises(planner.InputError, match=r"the plan is invalid") as err:
            export(bad, target)
        assert any(why in p for p in err.value.problems), err.value.problems
        with pytest.raises(planner.InputError, match=r"the plan is invalid"):
            render(bad, target)
    with pytest.raises(planner.InputError, match=r"the plan is invalid"):
        planner.export(more_gpus, "megatron").argv()
