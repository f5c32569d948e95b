"""Heterogeneous plans (issue 22): built by ``planner.plan``, checked by their own validator,
re-estimated by ``estimate --plan``, refused by the exports, shown by the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import planner
from planner.errors import InputError
from planner.plans.files import read_plan
from planner.plans.hetero.checks import hetero_problems
from planner.plans.named_model import plan_model
from planner.plans.schema import Plan

MIXED = {"model": "gpt-1.7b", "cluster": "dgx-h100:8,dgx-a100:8", "gpus": 16, "global_batch": 32, "seq_len": 2048, "top_k": 1,
         "tp": 1, "pp": 1, "micro_batch": 1}


@pytest.fixture(scope="module")
def mixed_plan() -> Plan:
    """8 H100 beside 8 A100: uneven shares, one GPU type per replica."""
    return planner.plan(**MIXED)


@pytest.fixture
def plan_path(mixed_plan: Plan, tmp_path: Path) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(mixed_plan.to_json())
    return path


def _edited(plan: Plan, path: Path, edit) -> Path:
    data = json.loads(plan.to_json())
    edit(data)
    path.write_text(json.dumps(data))
    return path


def test_the_plan_records_groups_speeds_shares_and_weights(mixed_plan: Plan) -> None:
    info = mixed_plan.hetero
    assert info is not None and [g.cluster.name for g in info.cluster.groups] == ["dgx-h100", "dgx-a100"]
    shares = {s.gpu_cluster: r.micro_batches for r in info.replicas for s in r.stages}
    assert shares["dgx-h100"] > shares["dgx-a100"]  # the faster GPUs take more of the batch
    assert sum(r.micro_batches for r in info.replicas) * mixed_plan.schedule.micro_batch == 32
    assert sum(r.grad_weight for r in info.replicas) == pytest.approx(len(info.replicas))  # the mean all-reduce of weighted means
    assert mixed_plan.search.status == "optimal"
    assert mixed_plan.request.constraints is not None and mixed_plan.request.constraints.fixed("tp") == 1


def test_same_inputs_give_byte_identical_json(mixed_plan: Plan) -> None:
    assert planner.plan(**MIXED).to_json() == mixed_plan.to_json()


def test_a_homogeneous_plan_has_no_hetero_key() -> None:
    plan = planner.plan(model="gpt-1.7b", cluster="dgx-h100", gpus=8, global_batch=32, seq_len=2048, top_k=1, tp=1, pp=1)
    assert plan.hetero is None and '"hetero"' not in plan.to_json()


def test_the_written_plan_validates_and_estimate_reproduces_it(mixed_plan: Plan, plan_path: Path) -> None:
    assert planner.load_plan(str(plan_path)).hetero is not None
    assert planner.estimate_plan(str(plan_path)).step_time_s == mixed_plan.estimate.step_time_s


@pytest.mark.parametrize("edit, fragment", [
    (lambda d: d["hetero"]["replicas"][1]["stages"][0].update(devices=d["hetero"]["replicas"][0]["stages"][0]["devices"]), "used twice"),
    (lambda d: d["hetero"]["replicas"][0].update(micro_batches=99), "global batch"),
    (lambda d: d["hetero"]["replicas"][0]["stages"][0].update(devices=[99]), "past the cluster"),
    (lambda d: d["hetero"]["replicas"][0]["stages"][0].update(speed=0.5), "slowest GPU runs at 1"),
    (lambda d: d["hetero"]["cluster"]["groups"][0].update(down_nodes=[0]), "node that is down"),
    (lambda d: d["hetero"]["replicas"][0]["stages"][0].update(memory_gib=1.0), "re-estimated"),
    (lambda d: d["hetero"]["replicas"][0].update(grad_weight=1.0), "gradient weight"),
    (lambda d: d["request"].update(target="megatron"), "a heterogeneous plan is native"),
    (lambda d: d["hetero"]["replicas"][0]["stages"][0].update(layers=[0, 1]), "in order"),
])
def test_the_validator_finds_each_broken_rule(mixed_plan: Plan, tmp_path: Path, edit, fragment: str) -> None:
    plan = read_plan(_edited(mixed_plan, tmp_path / "bad.json", edit))
    problems = hetero_problems(plan, plan_model(plan))
    assert any(fragment in p for p in problems), problems


def test_memory_over_a_stage_gpu_capacity_is_refused(mixed_plan: Plan, tmp_path: Path) -> None:
    def shrink(d: dict) -> None:
        d["hetero"]["cluster"]["groups"][1]["cluster"]["gpu"]["hbm_gib"] = 1.0
    plan = read_plan(_edited(mixed_plan, tmp_path / "small.json", shrink))
    assert any("needs" in p and "GiB" in p for p in hetero_problems(plan, plan_model(plan)))


@pytest.mark.parametrize("target", ["megatron", "torchtitan", "deepspeed"])
def test_exports_refuse_uneven_shares_and_mixed_types_in_one_line(mixed_plan: Plan, target: str) -> None:
    with pytest.raises(InputError) as err:
        planner.export(mixed_plan, target)
    text = str(err.value)
    assert "\n" not in text and "uneven data-parallel shares" in text and "different GPU types" in text


def test_the_report_maps_replicas_to_groups(mixed_plan: Plan) -> None:
    md, html = planner.report(mixed_plan, "md"), planner.report(mixed_plan, "html")
    assert "Stage / replica map" in md and "dgx-a100@1" in md and "dgx-h100" in md
    assert "background:#ddf4ff" in html and "background:#fff1e5" in html  # one colour per GPU group


def test_a_non_native_target_keeps_the_slow_node_out() -> None:
    plan = planner.plan(model="gpt-1.7b", cluster="dgx-h100", gpus=16, global_batch=32, seq_len=2048, top_k=1, tp=1, pp=1,
                        target="megatron", slow="node:1=0.5")
    assert plan.hetero is None and plan.request.gpus == 8
    assert "left out: nodes [1]" in plan.estimate.assumptions[-1]
    assert planner.export(plan, "megatron") is not None


def test_a_slow_gpu_gets_a_smaller_share() -> None:
    plan = planner.plan(model="gpt-1.7b", cluster="dgx-h100", gpus=8, global_batch=32, seq_len=2048, top_k=1, tp=1, pp=1,
                        micro_batch=1, slow="3=0.5")
    assert plan.hetero is not None
    slow = [r for r in plan.hetero.replicas if r.stages[0].devices == [3]]
    fast = [r for r in plan.hetero.replicas if r.stages[0].devices != [3]]
    assert not slow or slow[0].micro_batches < min(r.micro_batches for r in fast)
