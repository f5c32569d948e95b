"""``planner.serve_plan``: targets met, byte-identical plans, refusals with the nearest miss, and the
validator that re-prices a plan file."""

from __future__ import annotations

import json

import pytest

import planner
from planner.errors import InputError, NoFeasiblePlanError
from planner.serving.files import load_serving_plan, plan_json, save_serving_plan
from planner.serving.schema import ServingPlan

from .conftest import LLAMA


def test_plan_meets_its_targets_and_records_the_frontier(llama_serving_plan: ServingPlan) -> None:
    plan = llama_serving_plan
    assert plan.kind == "serving" and plan.schema_version == 1
    assert plan.estimate.ttft_ms <= 1000 and plan.estimate.tpot_ms <= 50
    assert plan.estimate.deployment.gpus <= 8
    assert len(plan.frontier) >= 3 and plan.alternatives
    best = plan.estimate.output_tokens_per_s_per_gpu
    assert all(a.output_tokens_per_s_per_gpu <= best + 1e-6 for a in plan.alternatives)
    assert any(f.label for f in plan.frontier if f.meets_targets)


def test_same_inputs_give_a_byte_identical_plan(llama_serving_plan: ServingPlan) -> None:
    assert plan_json(planner.serve_plan(**LLAMA)) == plan_json(llama_serving_plan)
    assert plan_json(planner.serve_plan(**LLAMA, timing=True)) != plan_json(llama_serving_plan)


def test_plan_file_round_trips_through_the_validator(llama_serving_plan: ServingPlan, tmp_path) -> None:
    path = tmp_path / "serving.json"
    save_serving_plan(llama_serving_plan, str(path))
    assert load_serving_plan(str(path)) == llama_serving_plan


@pytest.mark.parametrize(("edit", "fragment"), [
    (lambda d: d["estimate"].update(output_tokens_per_s_per_gpu=d["estimate"]["output_tokens_per_s_per_gpu"] * 2),
     "estimate.output_tokens_per_s_per_gpu"),
    (lambda d: d["estimate"]["deployment"].update(gpus=99), "deployment uses"),
    (lambda d: d.update(kind="training"), "not 'serving'"),
    (lambda d: d.update(schema_version=7), "schema_version 7"),
    (lambda d: d["request"].update(tpot_ms=1.0), "misses the target"),
    (lambda d: d.update(model="evil.py:build"), "names code to run"),
    (lambda d: d["request"].update(max_batch=1), "over the request's max_batch 1"),
])
def test_validator_refuses_a_tampered_plan(llama_serving_plan: ServingPlan, tmp_path, edit, fragment) -> None:
    data = json.loads(plan_json(llama_serving_plan))
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=fragment):
        load_serving_plan(str(path))


def test_unreachable_targets_raise_the_nearest_miss() -> None:
    with pytest.raises(NoFeasiblePlanError, match=r"nearest miss: .* it would need --tpot-ms"):
        planner.serve_plan(**{**LLAMA, "tpot_ms": 1})


def test_weights_that_fit_nowhere_say_by_how_much() -> None:
    with pytest.raises(NoFeasiblePlanError, match=r"needs \d+\.\d\d GiB more per GPU") as err:
        planner.serve_plan(model="llama3.1-405b", cluster="dgx-h100", gpus=2, isl=100, osl=100)
    assert err.value.shortfall_gib > 300


@pytest.mark.parametrize("kwargs", [dict(ttft_ms=0), dict(tpot_ms=-5), dict(disaggregation="maybe"), dict(max_batch=0),
                                    dict(max_batch=2.5), dict(max_batch=True)])
def test_bad_targets_are_input_errors(kwargs) -> None:
    with pytest.raises(InputError):
        planner.serve_plan(**{**LLAMA, **kwargs})


def test_moe_plan_can_use_expert_parallelism(moe_plan: ServingPlan) -> None:
    group = moe_plan.estimate.deployment.groups[0]
    assert moe_plan.estimate.tpot_ms <= 80
    assert group.tp * group.pp * group.workers <= 16


@pytest.mark.parametrize("disaggregation", ["off", "on"])
def test_max_batch_caps_every_worker_and_is_echoed(llama_aggregated_plan: ServingPlan, disaggregation: str) -> None:
    """``--max-batch`` (a load test's concurrency per instance, the engine's max-num-seqs) bounds the
    sequences each aggregated or decode worker runs, attention-DP ranks together; the uncapped plan
    runs more, so the cap costs throughput and is what the export passes to the engine."""
    capped = planner.serve_plan(**{**LLAMA, "tpot_ms": None}, disaggregation=disaggregation, max_batch=8)
    free = planner.serve_plan(**{**LLAMA, "tpot_ms": None}, disaggregation=disaggregation)
    decode = [g for g in capped.estimate.deployment.groups if g.role != "prefill"]
    assert decode and all(0 < g.concurrency_per_worker <= 8 for g in decode)
    assert max(g.concurrency_per_worker for g in free.estimate.deployment.groups) > 8
    assert capped.estimate.output_tokens_per_s_per_gpu < free.estimate.output_tokens_per_s_per_gpu
    assert capped.request.max_batch == 8 and free.request.max_batch is None
