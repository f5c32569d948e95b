"""The run record: JSON round trip, schema, relative errors."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from planner.runtime.record import RECORD_SCHEMA_VERSION, RunRecord, compare, run_record_schema


def _record(**over):
    base = dict(
        plan=dict(summary="tp 2", model_arg="m", cluster_name="c", cluster={}, gpus=2, global_batch=4, seq_len=16,
                  micro_batch=1, num_microbatches=2, schedule="1f1b", virtual_stages=1, mesh={"tp": 2},
                  stage_layers=[[0, 1, 2]], config={}, estimate={"step_time_s": 2.0}),
        model=dict(arg="m", name="m", num_layers=3, params=10, dtype="float32"),
        world_size=2,
        env=dict(torch_version="2", python_version="3", platform="linux", backend="gloo", device_type="cpu",
                 device_names=["cpu", "cpu"], hostnames=["h"]),
        seed=0, steps=3, warmup=1, losses=[1.0, 0.9, 0.8],
        step_time=dict(median_s=1.0, min_s=0.9, max_s=1.1, spread=0.2, timed_steps=2, warmup_steps=1, all_steps_s=[2, 1, 1]),
        step_time_s=compare(1.0, 2.0), tokens_per_s=compare(64.0, 32.0), mfu=compare(None, 0.4),
        peak_memory_gib=compare(0.1, 0.2),
        memory=[dict(rank=0, pp_rank=0, source="cpu", peak_allocated_gib=0.1, peak_reserved_gib=0.2, predicted_gib=0.2, error=-0.5)],
    )
    base.update(over)
    return RunRecord.model_validate(base)


def test_round_trip_and_version() -> None:
    rec = _record()
    again = RunRecord.model_validate_json(rec.to_json())
    assert again == rec and again.schema_version == RECORD_SCHEMA_VERSION
    assert json.loads(rec.to_json())["step_time_s"] == {"measured": 1.0, "predicted": 2.0, "error": -0.5}


def test_compare_errors() -> None:
    assert compare(3.0, 2.0).error == pytest.approx(0.5)
    assert compare(None, 2.0).error is None and compare(1.0, 0.0).error is None and compare(1.0, None).error is None


def test_schema_names_the_contract_fields_and_refuses_unknown() -> None:
    props = run_record_schema()["properties"]
    for key in ("schema_version", "plan", "model", "world_size", "env", "losses", "step_time", "step_time_s",
                "tokens_per_s", "mfu", "peak_memory_gib", "memory"):
        assert key in props
    with pytest.raises(ValidationError):
        _record(extra_field=1)
