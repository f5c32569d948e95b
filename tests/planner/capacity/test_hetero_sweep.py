"""Sweeps over mixed and degraded clusters (``planner.capacity.hetero``): each point is the plan
``planner.plan`` makes with the same cluster, ``slow`` and ``down``."""

from __future__ import annotations

import json

import pytest

import planner
from planner.capacity.api import sweep
from planner.capacity.hetero import fixed_constraints, is_mixed_arg
from planner.errors import InputError
from planner.plans.constraints import PlanConstraints

JOB = {"model": "gpt-1.7b", "seq_len": 2048, "tp": 1, "pp": 1, "micro_batch": 1}


def test_a_mixed_cluster_point_is_the_heterogeneous_plan() -> None:
    run = sweep(cluster="dgx-h100:8,dgx-a100:8", gpus=16, global_batch="32", **JOB)
    [point] = run.result.points
    plan = json.loads(run.plans[point.index])
    assert point.status == "ok" and plan["hetero"]["replicas"]
    want = planner.plan(cluster="dgx-h100:8,dgx-a100:8", gpus=16, global_batch=32, top_k=3, **JOB)
    assert point.step_time_s == want.estimate.step_time_s
    assert '"slow"' not in run.result.to_json()


def test_slow_and_down_apply_at_every_point_and_are_echoed() -> None:
    run = sweep(cluster="dgx-h100", gpus="16,24", global_batch="32", slow="3=0.5", down="node:1", **JOB)
    assert [p.status for p in run.result.points] == ["ok", "ok"]
    assert run.result.request.slow == ["3=0.5"] and run.result.request.down == ["node:1"]
    for point in run.result.points:
        used = json.loads(run.plans[point.index])["hetero"]["gpus_used"]
        assert used <= point.gpus - 8  # node 1 is down at every GPU count
    healthy = sweep(cluster="dgx-h100", gpus="16", global_batch="32", **JOB)
    assert run.result.points[0].step_time_s > healthy.result.points[0].step_time_s


@pytest.mark.parametrize("args, fragment", [
    ({"cluster": "dgx-h100:8,dgx-a100:8", "gpus": "16,32"}, "not 32"),
    ({"cluster": "dgx-h100", "gpus": "8,16", "slow": "9=0.5"}, "GPU 9 is past"),
    ({"cluster": "dgx-h100", "gpus": "16", "down": "node:0,node:1"}, "every one"),
    ({"cluster": "dgx-h100", "gpus": "16", "slow": "1=0"}, "(0, 1]"),
    ({"cluster": "dgx-h100:8,nope:8", "gpus": "16"}, "nope"),
])
def test_bad_cluster_input_is_one_input_error(args: dict, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        sweep(global_batch="32", **{**JOB, **args})
    assert fragment in str(err.value)


def test_mixed_arguments_and_constraints() -> None:
    assert is_mixed_arg("dgx-h100:16,dgx-a100:32") and not is_mixed_arg("dgx-h100,dgx-a100")
    with pytest.raises(InputError, match="not both"):
        is_mixed_arg("dgx-h100,dgx-a100:32")
    assert fixed_constraints(PlanConstraints(tp=(2, 2), zero=(1, 1))) == {"tp": 2, "zero": 1}
    with pytest.raises(InputError, match="--pp 1..4 is not searched"):
        fixed_constraints(PlanConstraints(pp=(1, 4)))
