"""Reading the user's constraints (one InputError line with the factors), and the validator's check
that a plan keeps the constraints its request echoes."""

from __future__ import annotations

import pytest

import planner
from planner.plans.constraints import PlanConstraints, parse_bounds, read_constraints
from planner.errors import InputError
from planner.intake.models import resolve_model
from planner.plans.plan_checks import plan_problems

GPT3 = resolve_model("gpt3-175b")  # 96 heads, 96 blocks
MIXTRAL = resolve_model("mixtral-8x7b")  # 8 experts


@pytest.mark.parametrize(("value", "bounds"), [
    (2, (2, 2)), ("2", (2, 2)), ("1..4", (1, 4)), (" 2.. ", (2, None)), ("..4", (1, 4)), ((1, 4), (1, 4)),
    ((2, None), (2, None)), ([1, 8], (1, 8)), (None, None),
])
def test_bounds_are_read_from_ints_tuples_and_strings(value: object, bounds: object) -> None:
    assert parse_bounds("pp", value) == bounds


def test_zero_ranges_start_at_zero() -> None:
    assert parse_bounds("zero", "..2") == (0, 2) and parse_bounds("zero", 0) == (0, 0)


@pytest.mark.parametrize(("name", "value", "fragment"), [
    ("pp", "4..2", "pp 4..2: the range is empty (write it lowest..highest, e.g. 2..4)"),
    ("tp", "two", "tp two: give an integer, or a range such as 1..4"),
    ("tp", 0, "tp 0: values must be integers of at least 1"),
    ("micro_batch", True, "micro-batch True: give an integer"),
    ("zero", 4, "zero 4: ZeRO stages are 0, 1, 2 and 3"),
    ("cp", (1, 2, 3), "cp (1, 2, 3): give an integer"),
    ("dp", "1...4", "dp 1...4: give an integer"),
])
def test_malformed_bounds_name_the_flag(name: str, value: object, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        parse_bounds(name, value)
    assert fragment in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("model", "gpus", "target", "values", "fragment"), [
    (GPT3, 48, "native", dict(tp=8, pp=4, cp=2), "tp 8 x pp 4 x cp 2 = 64 does not divide 48 GPUs"),
    (GPT3, 64, "native", dict(dp=4, tp=8, pp=4, cp=1), "dp 4 x tp 8 x pp 4 x cp 1 = 128 != 64 GPUs"),
    (GPT3, 64, "native", dict(tp=5), "tp 5 does not divide 64 GPUs"),
    (GPT3, 64, "native", dict(tp=64), "tp 64 does not divide 96 attention (or KV) heads"),
    (GPT3, 256, "native", dict(pp="128.."), "pp 128 exceeds the 96 layers a pipeline splits"),
    (GPT3, 64, "native", dict(ep=2), "ep 2 needs a mixture-of-experts model"),
    (MIXTRAL, 64, "native", dict(ep=3), "ep 3 does not divide 8 experts"),
    (GPT3, 64, "native", dict(dp=3), "dp 3 does not divide the global batch 64"),
    (GPT3, 64, "native", dict(dp=8, micro_batch=3), "micro-batch 3 does not divide the 8 sequences per replica"),
    (GPT3, 64, "native", dict(micro_batch=128), "micro-batch 128 exceeds the 64 sequences per replica"),
    (GPT3, 64, "native", dict(tp=1, sp=True), "sp needs tp > 1 (tp 1 given"),
    (GPT3, 64, "native", dict(vpp=2, schedule="gpipe"), "vpp 2 needs schedule interleaved-1f1b (schedule gpipe given)"),
    (GPT3, 64, "native", dict(vpp=1, schedule="interleaved-1f1b"), "schedule interleaved-1f1b needs vpp > 1"),
    (GPT3, 64, "native", dict(pp=1, schedule="zb-h1"), "schedule zb-h1 needs pp > 1 (pp 1 given)"),
    (GPT3, 64, "native", dict(recompute="some"), "recompute 'some' is not one of none, selective, full"),
    (GPT3, 64, "native", dict(schedule="zb-v"), "schedule 'zb-v' is not one of"),
    (GPT3, 64, "native", dict(sp="yes"), "sp must be True, False or None"),
    (GPT3, 64, "megatron", dict(schedule="gpipe"), "megatron runs 1f1b or interleaved-1f1b, not schedule gpipe"),
    (GPT3, 64, "torchtitan", dict(zero="1..2"), "torchtitan shards with zero 0 or 3, not zero 1..2"),
    (GPT3, 64, "deepspeed", dict(cp=2), "deepspeed has no context parallelism"),
    (GPT3, 64, "torchtitan", dict(tp=8, sp=False), "torchtitan always applies sequence parallelism"),
])
def test_contradictory_constraints_are_one_line_with_the_factors(model, gpus: int, target: str, values: dict, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        read_constraints(model, gpus, 64, target, **values)
    assert fragment in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(InputError) as err:
        read_constraints(GPT3, 64, 64, "native", tp=64, ep=2, vpp=2, schedule="gpipe")
    assert len(err.value.problems) == 3


def test_valid_constraints_are_kept_as_ranges() -> None:
    c = read_constraints(GPT3, 64, 64, "native", tp=8, pp="1..4", zero=(1, None), sp=True, recompute="full")
    assert c == PlanConstraints(tp=(8, 8), pp=(1, 4), zero=(1, None), sp=True, recompute="full")
    assert c.fixed("tp") == 8 and c.fixed("pp") is None and not c.is_empty() and PlanConstraints().is_empty()


def test_the_validator_rejects_a_plan_that_breaks_its_echoed_constraints() -> None:
    plan = planner.plan(model="gpt3-175b", cluster="dgx-a100", gpus=64, global_batch=64, seq_len=2048, tp=8, pp="2..4",
                        recompute="selective", top_k=0)
    assert plan_problems(plan) == []
    assert plan.request.constraints == PlanConstraints(tp=(8, 8), pp=(2, 4), recompute="selective")
    c = plan.config
    edited = PlanConstraints(tp=(4, 4), pp=(c.pp + 1, None), zero=(c.zero + 1, 3), recompute="full", sp=not c.sp, schedule="gpipe")
    broken = plan.model_copy(update={"request": plan.request.model_copy(update={"constraints": edited})})
    problems = plan_problems(broken)
    assert "tp 8 breaks the constraint tp 4" in problems
    assert f"pp {c.pp} breaks the constraint pp {c.pp + 1}.." in problems
    assert f"zero {c.zero} breaks the constraint zero {c.zero + 1}..3" in problems
    assert any(p.startswith("layers recompute selective, breaking the constraint recompute full") for p in problems)
    assert any(p.startswith("sp ") for p in problems) and any(p.startswith("schedule ") for p in problems)
    assert len(problems) == 6
