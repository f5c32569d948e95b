"""DeepSpeed export: golden config and code, the batch identity, partitions, refusals."""

from __future__ import annotations

import json

import pytest

from planner.outputs.export import engine_export, text_of
from planner.plans.named_model import plan_model
from planner.plans.engines.common import UnsupportedPlanError
from planner.plans.engines.deepspeed import DeepSpeedExport, partition_uniform

PIPE = dict(tp=1, pp=4, dp=4, zero=1, global_batch=64, seq_len=4096, micro_batch=2, recompute="full")


def unchecked(plan, target: str):
    """The exporter alone (``engine_export``): these tests check its mapping on fixed configurations,
    some over an H100's memory, which ``export`` refuses before exporting (tested in test_api.py)."""
    return engine_export(plan, target, plan_model(plan))


def test_golden_pipeline(plan_of, golden) -> None:
    plan = plan_of(**PIPE)
    golden("deepspeed_llama8b_pipeline.json", text_of(unchecked(plan, "deepspeed"), "deepspeed"))
    result = unchecked(plan, "deepspeed")
    assert isinstance(result, DeepSpeedExport)
    golden("deepspeed_llama8b_pipeline.py.txt", result.python())


def test_golden_zero3_autotp(plan_of, golden) -> None:
    golden("deepspeed_llama8b_zero3.json", text_of(unchecked(plan_of(tp=2, dp=8, zero=3, global_batch=64, seq_len=4096, micro_batch=1), "deepspeed"), "deepspeed"))


@pytest.mark.parametrize("config", [PIPE, dict(tp=2, dp=8, zero=3, global_batch=64, seq_len=4096, micro_batch=1),
                                    dict(tp=1, dp=16, zero=2, global_batch=128, seq_len=4096, micro_batch=4)])
def test_batch_identity(plan_of, config: dict) -> None:
    plan = plan_of(**config)
    ds = unchecked(plan, "deepspeed").config
    assert ds["train_batch_size"] == ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] * plan.mesh.dp
    assert ds["train_batch_size"] == plan.request.global_batch
    assert all(isinstance(ds[k], int) for k in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"))


def test_pipeline_code_settings(plan_of) -> None:
    result = unchecked(plan_of(**PIPE), "deepspeed")
    pm = result.code["pipeline_module"]
    assert pm == {"num_stages": 4, "partition_method": "type:transformer", "activation_checkpoint_interval": 1}
    assert result.config["zero_optimization"]["stage"] <= 1


def test_uniform_partition_when_it_matches(plan_of) -> None:
    bounds = partition_uniform(35, 4)
    sizes = tuple(b - a for a, b in zip(bounds, bounds[1:]))
    assert sizes == (9, 9, 9, 8)
    assert unchecked(plan_of(**{**PIPE, "recompute": "none"}, stage_layers=sizes), "deepspeed").code["pipeline_module"]["partition_method"] == "uniform"


def test_partition_uniform_is_deepspeeds() -> None:
    # runtime/utils.py: arange(0, (parts + 1) * chunk, chunk), then the first `residual` parts grow by one
    assert partition_uniform(10, 4) == [0, 3, 6, 8, 10]
    assert partition_uniform(3, 4) == [0, 1, 2, 3, 3]


@pytest.mark.parametrize(("change", "field"), [
    ({"zero": 2}, "mesh.zero"),
    ({"zero": 3}, "mesh.zero"),
    ({"cp": 2, "dp": 2}, "mesh.cp"),
    ({"tp": 2, "dp": 2, "sp": True}, "mesh.sp"),
    ({"vpp": 2, "schedule": "interleaved-1f1b"}, "schedule.name"),
    ({"recompute": "selective"}, "config.recompute"),
    ({"stage_layers": (5, 10, 10, 10)}, "stages[].layers"),
])
def test_refusals_name_the_field(plan_of, change: dict, field: str) -> None:
    plan = plan_of(**{**PIPE, **change})
    with pytest.raises(UnsupportedPlanError) as err:
        unchecked(plan, "deepspeed")
    assert err.value.field == field and field in str(err.value)


def test_json_is_the_config(plan_of) -> None:
    plan = plan_of(**PIPE)
    assert json.loads(text_of(unchecked(plan, "deepspeed"), "deepspeed")) == unchecked(plan, "deepspeed").config
    full = json.loads(text_of(unchecked(plan, "deepspeed"), "deepspeed", "json"))
    assert set(full) == {"header", "config", "code", "notes"}
