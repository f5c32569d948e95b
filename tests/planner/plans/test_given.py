"""``planner.config_plan`` / ``planner.save_plan``: the plan file of exactly one estimated configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

import planner
from planner.plans.constraints import PlanConstraints
from planner.errors import InputError, NoFeasiblePlanError
from planner.plans.given import GIVEN_SOLVER
from planner.plans.plan_checks import plan_problems

JOB = dict(model="gpt3-175b", cluster="dgx-a100", gpus=1024, global_batch=1536, seq_len=2048)


def test_the_plan_holds_exactly_the_estimated_configuration(tmp_path: Path) -> None:
    settings = dict(tp=8, pp=16, vpp=2, micro_batch=1, recompute="selective", zero=1)
    plan = planner.config_plan(**JOB, **settings)
    assert plan.estimate == planner.estimate(**JOB, **settings)
    assert plan.config.stage_layers is None and plan.config.layer_recompute is None  # the estimate's default split
    assert plan.request.constraints == PlanConstraints(tp=(8, 8), pp=(16, 16), cp=(1, 1), dp=(8, 8), ep=(1, 1), vpp=(2, 2), zero=(1, 1),
                                                       micro_batch=(1, 1), sp=True, recompute="selective", schedule="interleaved-1f1b")
    assert plan.search.solver == GIVEN_SOLVER and plan.search.candidates_evaluated == 1 and plan.alternatives == []
    assert plan.search.status == "feasible" and 0 < plan.search.optimality_gap < 0.5
    assert plan_problems(plan) == []
    path = tmp_path / "plan.json"
    planner.save_plan(plan, str(path))
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]  # no temporary file left
    assert path.read_text() == plan.to_json()
    assert planner.estimate_plan(str(path)) == plan.estimate


def test_a_configuration_that_does_not_fit_has_no_plan() -> None:
    with pytest.raises(NoFeasiblePlanError, match=r"needs \d+\.\d GiB per GPU of 78\.\d GiB \(short by") as err:
        planner.config_plan(**{**JOB, "gpus": 64, "global_batch": 64}, tp=8)
    assert err.value.shortfall_gib and err.value.shortfall_gib > 0


def test_a_configuration_the_target_cannot_express_is_refused() -> None:
    with pytest.raises(InputError, match="cannot be written as a deepspeed plan: .*deepspeed forbids ZeRO-3 with pipeline"):
        planner.config_plan(**JOB, tp=8, pp=16, zero=3, sp=False, target="deepspeed")


def test_save_plan_refuses_a_missing_directory(tmp_path: Path) -> None:
    plan = planner.config_plan(**JOB, tp=8, pp=16)
    with pytest.raises(InputError, match="cannot write the plan .*missing"):
        planner.save_plan(plan, str(tmp_path / "missing" / "plan.json"))
    assert list(tmp_path.iterdir()) == []
