"""The gain of a heterogeneous plan over its homogeneous alternatives (``planner.plans.hetero.gain``)
and the proven gap of a packed search, as plans record and reports show them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import planner
from planner.cli.plan import summary_text
from planner.plans.files import read_plan
from planner.plans.hetero.plan import BOUND_NOTE
from planner.plans.hetero.checks import hetero_problems
from planner.plans.named_model import plan_model
from planner.plans.schema import Plan

MIXED = {"model": "gpt-1.7b", "cluster": "dgx-h100:8,dgx-a100:8", "gpus": 16, "global_batch": 32, "seq_len": 2048, "top_k": 1,
         "tp": 1, "pp": 1, "micro_batch": 1}


@pytest.fixture(scope="module")
def mixed_plan() -> Plan:
    return planner.plan(**MIXED)


def test_a_mixed_plan_records_both_baselines_with_their_speedups(mixed_plan: Plan) -> None:
    assert mixed_plan.hetero is not None and mixed_plan.hetero.baselines is not None
    got = {b.name: b for b in mixed_plan.hetero.baselines}
    assert sorted(got) == ["all-as-slowest", "fastest-group"]
    assert got["fastest-group"].gpus == 8 and got["all-as-slowest"].gpus == 16
    for b in got.values():
        assert b.step_time_s is not None and b.speedup == round(b.step_time_s / mixed_plan.estimate.step_time_s, 6)
        assert b.plan_summary is not None and "tp 1 x pp 1" in b.plan_summary  # the plan's constraints hold for the baselines too
    same_job = planner.plan(model="gpt-1.7b", cluster="dgx-a100", gpus=16, global_batch=32, seq_len=2048, top_k=1, tp=1, pp=1, micro_batch=1)
    assert got["all-as-slowest"].step_time_s == same_job.estimate.step_time_s


def test_a_degraded_plan_records_the_straggler_blind_and_healthy_baselines() -> None:
    plan = planner.plan(model="gpt-1.7b", cluster="dgx-h100", gpus=16, global_batch=32, seq_len=2048, top_k=1, tp=1, pp=1,
                        slow="node:1=0.5")
    assert plan.hetero is not None and plan.hetero.baselines is not None
    got = {b.name: b for b in plan.hetero.baselines}
    assert sorted(got) == ["healthy-only", "straggler-blind"]
    assert got["straggler-blind"].gpus == 16 and got["healthy-only"].gpus == 8
    assert got["straggler-blind"].speedup > 1  # uneven shares beat waiting for the slow node


def test_the_validator_finds_a_wrong_speedup(mixed_plan: Plan, tmp_path: Path) -> None:
    data = json.loads(mixed_plan.to_json())
    data["hetero"]["baselines"][0]["speedup"] = 9.0
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    plan = read_plan(path)
    assert any("speedup 9.0" in p for p in hetero_problems(plan, plan_model(plan)))


def test_estimate_reproduces_the_plan_and_the_summary_and_reports_show_the_gain(mixed_plan: Plan, tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(mixed_plan.to_json())
    assert planner.estimate_plan(str(path)).step_time_s == mixed_plan.estimate.step_time_s
    label = mixed_plan.hetero.baselines[0].label
    assert "gain over homogeneous alternatives:" in summary_text(mixed_plan) and label in summary_text(mixed_plan)
    for fmt in ("md", "html"):
        text = planner.report(mixed_plan, fmt)
        assert "Gain over homogeneous alternatives" in text and label in text


def test_a_packed_search_records_a_proven_gap() -> None:
    plan = planner.plan(model="gpt-1.7b", cluster="dgx-h100:64,dgx-a100:64", gpus=128, global_batch=256, seq_len=2048, top_k=1,
                        tp=1, pp=1, micro_batch=1)
    assert plan.search.status == "feasible" and plan.search.optimality_gap > 0
    assert BOUND_NOTE in plan.estimate.assumptions
