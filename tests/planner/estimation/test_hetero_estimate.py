"""``planner.estimate`` on mixed and degraded clusters (``planner.estimation.hetero``): the given
uniform configuration, replicas in GPU order with equal shares, each stage on its own GPU type."""

from __future__ import annotations

import pytest

import planner
from planner.errors import InputError
from planner.estimation.hetero import UNIFORM_NOTE, alive_gpus
from profiles import degrade, load_hetero_cluster

JOB = {"model": "gpt-1.7b", "global_batch": 32, "seq_len": 2048, "tp": 1, "pp": 1, "micro_batch": 1}


def test_a_uniform_configuration_on_mixed_types_waits_for_the_slow_type() -> None:
    mixed = planner.estimate(cluster="dgx-h100:8,dgx-a100:8", gpus=16, **JOB)
    a100 = planner.estimate(cluster="dgx-a100", gpus=16, **JOB)
    h100 = planner.estimate(cluster="dgx-h100", gpus=16, **JOB)
    assert UNIFORM_NOTE in mixed.assumptions and mixed.config["dp"] == 16
    assert h100.step_time_s < mixed.step_time_s <= a100.step_time_s * 1.05  # equal shares: the A100 replicas set the pace
    plan = planner.plan(cluster="dgx-h100:8,dgx-a100:8", gpus=16, top_k=1, **JOB)
    assert plan.search.status == "optimal" and plan.estimate.step_time_s <= mixed.step_time_s  # uneven shares can only help


def test_a_slow_gpu_slows_the_uniform_configuration() -> None:
    healthy = planner.estimate(cluster="dgx-h100", gpus=16, **JOB)
    slowed = planner.estimate(cluster="dgx-h100", gpus=16, slow="3=0.5", **JOB)
    assert slowed.step_time_s > healthy.step_time_s
    same = planner.estimate(cluster="dgx-h100", gpus=16, slow="3=1", **JOB)  # full speed: exactly the homogeneous estimate
    assert same.model_dump() == healthy.model_dump()


def test_a_lost_node_leaves_dp_to_the_gpus_that_are_up() -> None:
    got = planner.estimate(cluster="dgx-h100", gpus=24, down="node:1", **JOB)
    assert got.config["dp"] == 16
    cluster = degrade(load_hetero_cluster("dgx-h100", 24), None, "node:1")
    assert alive_gpus(cluster) == list(range(8)) + list(range(16, 24))


@pytest.mark.parametrize("extra, fragment", [
    ({"cluster": "dgx-h100:8,dgx-a100:8", "gpus": 16, "cp": 2}, "--cp 2 is not estimated"),
    ({"cluster": "dgx-h100:8,dgx-a100:8", "gpus": 16, "target": "megatron"}, "--target megatron"),
    ({"cluster": "dgx-h100", "gpus": 24, "down": "node:1", "tp": 8, "pp": 3}, "does not divide the 16 GPUs that are up"),
    ({"cluster": "dgx-h100:8,dgx-a100:8", "gpus": 16, "global_batch": 24}, "global batch 24"),
    ({"cluster": "dgx-h100:8,no-such:8", "gpus": 16}, "no-such"),
    ({"cluster": "dgx-h100", "gpus": 16, "slow": "3=0"}, "(0, 1]"),
])
def test_bad_input_is_one_input_error(extra: dict, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        planner.estimate(**{**JOB, **extra})
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_a_cluster_object_takes_slow_gpus_too() -> None:
    from profiles import load_cluster

    spec = load_cluster("dgx-h100")
    assert planner.estimate(cluster=spec, gpus=16, slow="3=0.5", **JOB) == planner.estimate(cluster="dgx-h100", gpus=16, slow="3=0.5", **JOB)
    # a partial last node (12 of 8-GPU nodes), as the plain estimate takes it (issue 35)
    job = {**JOB, "global_batch": 48}
    assert planner.estimate(cluster=spec, gpus=12, slow="3=0.5", **job) == planner.estimate(cluster="dgx-h100", gpus=12, slow="3=0.5", **job)
