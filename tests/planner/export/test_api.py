"""The launcher API: ``planner.load_plan`` and the Plan methods."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import planner
from planner.export.deepspeed import DeepSpeedExport
from planner.export.torchtitan import TorchtitanExport


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
    plan = plan_of(tp=1, pp=2, dp=8, zero=0, global_batch=64, seq_len=4096)
    assert isinstance(plan.to_megatron_args(), list) and isinstance(plan.to_megatron_args(grouped=True), dict)
    assert isinstance(plan.to_torchtitan(), TorchtitanExport) and isinstance(plan.to_deepspeed(), DeepSpeedExport)
    assert plan.report().startswith("# meshplan report") and plan.report(format="html").startswith("<!DOCTYPE html>")
