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


def _times(**over) -> dict:
    return {**dict(rank=0, gpu=0, group=0, micro_batches=2, injected_speed=1.0, compute_s=[1.0], wait_s=[0.0], sync_s=[0.1]), **over}


def test_pipeline_keys_of_rank_times_appear_only_when_a_rank_pipelined() -> None:
    whole = json.loads(_record(rank_times=[_times(), _times(rank=1)]).to_json())["rank_times"]
    assert all("layers" not in r and "p2p_s" not in r for r in whole)
    staged = _record(rank_times=[_times(layers=[0, 1], p2p_s=[0.2]), _times(rank=1, layers=[2], p2p_s=[0.3])])
    again = RunRecord.model_validate_json(staged.to_json())
    assert again == staged and [r.layers for r in again.rank_times] == [[0, 1], [2]]
    assert "rank_times" not in json.loads(_record().to_json())


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
