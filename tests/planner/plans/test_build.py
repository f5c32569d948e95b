"""``planner.plan``'s keyword options that are not covered through the CLI tests."""

from __future__ import annotations

import pytest

import planner
from costmodel.headroom import headroom_gib
from planner.errors import InputError
from planner.plans.plan_checks import plan_problems

GPT3_64 = dict(model="gpt3-175b", cluster="dgx-a100", gpus=64, global_batch=64, seq_len=2048, target="deepspeed")


def test_memory_headroom_replaces_the_clusters_and_keeps_that_much_of_every_gpu_free() -> None:
    """``memory_headroom_gib`` replaces the cluster's own headroom (``costmodel.headroom``): the plan's
    peak plus it fits the GPU, and the plan's echoed cluster states it."""
    tight = planner.plan(**GPT3_64)
    roomy = planner.plan(**GPT3_64, memory_headroom_gib=25.0)
    hbm = tight.cluster.gpu.hbm_gib
    assert tight.estimate.memory_headroom_gib == headroom_gib(tight.cluster) == 0.96  # dgx-a100's, measured
    assert tight.estimate.peak_memory_gib + 25.0 > hbm  # the default plan uses that room
    assert roomy.cluster.memory_headroom_gib == roomy.estimate.memory_headroom_gib == 25.0
    assert roomy.cluster.runtime_overhead_gib == tight.cluster.runtime_overhead_gib
    assert roomy.estimate.peak_memory_gib + 25.0 <= hbm
    assert roomy.estimate.memory_capacity_gib == pytest.approx(hbm - 25.0)
    assert roomy.estimate.step_time_s >= tight.estimate.step_time_s
    assert plan_problems(roomy) == []


@pytest.mark.parametrize("bad", [-1.0, float("inf"), "8"])
def test_memory_headroom_must_be_a_non_negative_number(bad: object) -> None:
    with pytest.raises(InputError, match="memory-headroom"):
        planner.plan(**GPT3_64, memory_headroom_gib=bad)  # type: ignore[arg-type]


GPT3_64_NATIVE = dict(model="gpt3-175b", cluster="dgx-a100", gpus=64, global_batch=64, seq_len=2048, top_k=1)


def test_constraints_fix_and_bound_the_plan() -> None:
    plan = planner.plan(**GPT3_64_NATIVE, tp=4, pp=(2, 8), zero="0..1", micro_batch=1, sp=True, recompute="full", schedule="1f1b")
    c = plan.config
    assert (c.tp, c.micro_batch, c.sp, c.schedule) == (4, 1, True, "1f1b") and 2 <= c.pp <= 8 and c.zero <= 1
    assert c.recompute == "full" and c.layer_recompute is None
    assert plan.request.constraints is not None and plan.request.constraints.pp == (2, 8)
    assert plan_problems(plan) == []


def test_fixing_the_free_optimum_finds_it_again() -> None:
    free = planner.plan(**GPT3_64)
    assert free.request.constraints is None
    c = free.config
    fixed = planner.plan(**GPT3_64, tp=c.tp, pp=c.pp, cp=c.cp, dp=c.dp, ep=c.ep, vpp=c.vpp, zero=c.zero,
                         micro_batch=c.micro_batch, sp=c.sp, schedule=c.schedule)
    assert fixed.estimate.step_time_s == pytest.approx(free.estimate.step_time_s, rel=1e-12)


def test_constraints_nothing_satisfies_name_the_nearest_configuration() -> None:
    with pytest.raises(planner.NoFeasiblePlanError) as err:
        planner.plan(**GPT3_64_NATIVE, tp=8, micro_batch=3)
    message = str(err.value)
    assert message.startswith("no configuration satisfies the constraints (tp 8, micro-batch 3); nearest: tp 8 x ")
    assert "which has micro-batch 4 (asked micro-batch 3)" in message and "\n" not in message


def test_nothing_fits_within_the_constraints_names_the_constrained_miss() -> None:
    with pytest.raises(planner.NoFeasiblePlanError) as err:
        planner.plan(**GPT3_64_NATIVE, tp=1, pp=1, zero=0)
    assert "nearest miss: tp 1 x pp 1 x " in str(err.value) and "zero 0" in str(err.value)
    assert "ZeRO-3 / FSDP sharding of parameters (loosen --zero)" in str(err.value)


def test_bad_constraints_raise_one_input_error() -> None:
    with pytest.raises(InputError, match=r"^tp 3: values: give an integer.*; pp 4\.\.2: the range is empty") as err:
        planner.plan(**GPT3_64_NATIVE, pp="4..2", tp="3: values")
    assert len(err.value.problems) == 2


def test_precision_fp8_plans_fp8_gemms_where_the_gpu_has_them() -> None:
    """``precision="fp8"`` searches FP8 projections (echoed in the request, chosen in the config,
    estimated faster than the bf16 plan of the same job); a GPU without FP8 tensor cores is bad input."""
    job = dict(model="llama3.1-8b", cluster="dgx-h100", gpus=8, global_batch=32, seq_len=4096, target="megatron", top_k=0)
    fp8, bf16 = planner.plan(**job, precision="fp8"), planner.plan(**job)
    assert (fp8.request.precision, fp8.config.precision) == ("fp8", "fp8")
    assert (bf16.request.precision, bf16.config.precision) == ("bf16", "bf16")
    assert fp8.estimate.step_time_s < bf16.estimate.step_time_s and plan_problems(fp8) == []
    with pytest.raises(InputError, match="no FP8 tensor cores"):
        planner.plan(**{**job, "cluster": "dgx-a100"}, precision="fp8")
    with pytest.raises(InputError, match="precision must be bf16 or fp8"):
        planner.plan(**job, precision="fp4")
