"""Re-estimates agree with the plan's own numbers and move the right way."""

from __future__ import annotations

import pytest

from planner.plans.engines.common import resolve_plan_model
from planner.outputs.report.whatif import MEMORY_PARTS, what_if


@pytest.fixture(scope="module")
def extras(llama_plan):
    return what_if(llama_plan, resolve_plan_model(llama_plan))


def test_baseline_is_the_plans_estimate(llama_plan, extras) -> None:
    assert extras.baseline_step_s == pytest.approx(llama_plan.estimate.step_time_s, rel=1e-12)
    assert extras.scenarios[0].label == "as planned"


def test_rank_memory_adds_up_to_each_stage(llama_plan, extras) -> None:
    assert len(extras.rank_memory_gib) == llama_plan.mesh.pp
    for rank, parts in zip(llama_plan.estimate.pipeline_ranks, extras.rank_memory_gib):
        assert set(parts) == set(MEMORY_PARTS)
        assert sum(parts.values()) == pytest.approx(rank.memory_gib)
    peak = max(extras.rank_memory_gib, key=lambda p: sum(p.values()))
    shown = llama_plan.estimate.memory_breakdown_gib.model_dump()
    shown["activations"] = shown.pop("activations_at_peak")
    assert peak == pytest.approx(shown)


def test_runner_up_breakdown_adds_up(llama_plan, extras) -> None:
    alt = extras.alternatives[0]
    assert sum(alt.time_s.values()) == pytest.approx(llama_plan.alternatives[0].step_time_s)


def test_scenarios_move_the_right_way(llama_plan, extras) -> None:
    by = {s.label: s for s in extras.scenarios}
    base = llama_plan.estimate.step_time_s
    assert by["network bandwidth halved"].step_time_s >= base
    assert by["compute efficiency -10 %"].step_time_s > base
    more, fewer = by["one more node"], by["one fewer node"]
    assert more.change == "64 -> 72 GPUs" and fewer.change == "64 -> 56 GPUs"
    assert more.shape.startswith("re-planned") or more.step_time_s is None


def test_one_node_plan_has_no_fewer_node_scenario(plan_factory) -> None:
    plan = plan_factory("llama3.1-8b", "dgx-h100", tp=2, dp=4, sp=True, zero=1, global_batch=32, seq_len=4096)
    by = {s.label: s for s in what_if(plan, resolve_plan_model(plan)).scenarios}
    assert by["one fewer node"].shape == "no GPUs left" and by["one fewer node"].step_time_s is None
    assert by["one more node"].change == "8 -> 16 GPUs"
