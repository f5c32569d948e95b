"""``planner.plan``'s keyword options that are not covered through the CLI tests."""

from __future__ import annotations

import pytest

import planner
from planner.errors import InputError
from planner.validate import plan_problems

GPT3_64 = dict(model="gpt3-175b", cluster="dgx-a100", gpus=64, global_batch=64, seq_len=2048, target="deepspeed")


def test_memory_headroom_keeps_that_much_of_every_gpu_free() -> None:
    tight = planner.plan(**GPT3_64)
    roomy = planner.plan(**GPT3_64, memory_headroom_gib=8.0)
    capacity = tight.estimate.memory_capacity_gib
    assert tight.estimate.peak_memory_gib > capacity - 8.0  # the default plan uses that room
    assert roomy.cluster.runtime_overhead_gib == tight.cluster.runtime_overhead_gib + 8.0
    assert roomy.estimate.peak_memory_gib - 8.0 <= capacity - 8.0
    assert roomy.estimate.step_time_s >= tight.estimate.step_time_s
    assert plan_problems(roomy) == []


@pytest.mark.parametrize("bad", [-1.0, float("inf"), "8"])
def test_memory_headroom_must_be_a_non_negative_number(bad: object) -> None:
    with pytest.raises(InputError, match="memory-headroom"):
        planner.plan(**GPT3_64, memory_headroom_gib=bad)  # type: ignore[arg-type]
