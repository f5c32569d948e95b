"""``planner.capacity``: every point is the plan a single ``planner.plan`` finds, whichever way the
searches ran; the batch chosen per point trains fastest; what no point can do is an error."""

from __future__ import annotations

import pytest

import planner
from planner.errors import InputError, NoFeasiblePlanError
from planner.capacity.api import sweep
from tests.planner.capacity.conftest import GRID


def test_every_point_is_the_plan_a_single_search_finds(tiny_sweep, tiny_model: str) -> None:
    points = tiny_sweep.result.points
    assert [(p.cluster, p.gpus, p.global_batch) for p in points] == [
        (c, g, 16) for c in ("dgx-h100", "dgx-a100") for g in (8, 16)]  # stable grid order
    for p in points:
        single = planner.plan(model=tiny_model, cluster=p.cluster, gpus=p.gpus, global_batch=p.global_batch, seq_len=1024)
        assert p.status == "ok" and p.step_time_s == single.estimate.step_time_s
        assert tiny_sweep.plan(p.index).to_json() == single.to_json()  # the same plan, byte for byte
        assert p.mfu == single.estimate.mfu and p.peak_memory_gib == single.estimate.peak_memory_gib


def test_local_processes_give_the_same_bytes(tiny_sweep, tiny_model: str) -> None:
    parallel = sweep(model=tiny_model, workers=2, **GRID)
    assert parallel.result.to_json() == tiny_sweep.result.to_json()
    assert parallel.plans == tiny_sweep.plans


def test_training_figures_follow_from_the_plan(tiny_sweep) -> None:
    """Time, GPU-hours, cost and energy recomputed by hand from each plan's estimate."""
    power = {x.cluster: x for x in tiny_sweep.result.power}
    assert power["dgx-h100"].gpu_tdp_w == 700 and power["dgx-a100"].gpu_tdp_w == 400
    for p in tiny_sweep.result.points:
        e = tiny_sweep.plan(p.index).estimate
        seconds = 20e9 / (p.global_batch * 1024) * e.step_time_s
        assert p.time_to_train_s == pytest.approx(seconds, rel=1e-12)
        assert p.gpu_hours == pytest.approx(p.gpus * seconds / 3600, rel=1e-12)
        assert p.cost_usd == pytest.approx(p.gpu_hours * {"dgx-h100": 3.0, "dgx-a100": 1.5}[p.cluster], rel=1e-12)
        busy = (e.time_breakdown_s.compute + e.time_breakdown_s.recompute) / e.step_time_s
        watts = p.gpus * power[p.cluster].gpu_tdp_w * busy + p.nodes * power[p.cluster].node_overhead_w
        assert p.energy_kwh == pytest.approx(seconds * watts / 3.6e6, rel=1e-12)
        assert p.tokens_per_s == e.tokens_per_s and p.memory_headroom_gib == pytest.approx(e.memory_capacity_gib - e.peak_memory_gib)


def test_scaling_efficiency_is_per_gpu_throughput_against_the_smallest_count(tiny_sweep) -> None:
    by = {(p.cluster, p.gpus, p.global_batch): p for p in tiny_sweep.result.points}
    for (cluster, gpus, batch), p in by.items():
        base = by[cluster, 8, batch]
        assert p.scaling_efficiency == pytest.approx((p.tokens_per_s / gpus) / (base.tokens_per_s / 8))
    assert {by[c, 8, 16].scaling_efficiency for c in ("dgx-h100", "dgx-a100")} == {1.0}
    assert all(0 < p.scaling_efficiency <= 1.0 for p in by.values())


def test_a_batch_range_keeps_the_batch_that_trains_fastest_not_the_largest(small_model: str) -> None:
    run = sweep(model=small_model, cluster="dgx-h100", gpus=8, global_batch="16..1024", critical_batch=64, seq_len=2048, tokens="5B")
    (point,) = run.result.points
    tries = {t.global_batch: t.step_time_s for t in point.batch_tries}
    assert sorted(tries) == [16, 32, 64, 128, 256, 512, 1024] and None not in tries.values()
    # McCandlish et al. 2018: time to train is proportional to step_time(B) (1 + B_crit / B)
    expected = min(tries, key=lambda b: tries[b] * (1 + 64 / b))
    assert point.global_batch == expected and 16 < expected < 1024
    assert point.tokens_needed == pytest.approx(5e9 * (1 + expected / 64) / 2)
    assert min(t.relative_time for t in point.batch_tries) == 1.0


def test_a_grid_without_any_plan_raises(tiny_model: str) -> None:
    with pytest.raises(NoFeasiblePlanError, match="no point of the grid has a plan"):
        sweep(model="gpt3-175b", cluster="dgx-a100", gpus=1, global_batch=1, seq_len=2048)


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(gpus="4096..64"), "empty range"),
    (dict(gpus="12"), "does not fill whole dgx-h100 nodes of 8 GPUs"),
    (dict(global_batch="auto"), "needs --critical-batch"),
    (dict(deadline="30d"), "--deadline needs --tokens"),
    (dict(workers=0), "workers must be a positive number"),
])
def test_bad_grids_are_input_errors(tiny_model: str, kwargs: dict, message: str) -> None:
    grid = dict(model=tiny_model, cluster="dgx-h100", gpus="8", global_batch="16", seq_len=1024) | kwargs
    with pytest.raises(InputError, match=message):
        sweep(**grid)


def test_constraints_apply_to_every_point_as_in_a_single_plan(tiny_model: str) -> None:
    fixed = dict(tp=2, pp=2, cp=1, dp=2, zero=1)
    run = sweep(model=tiny_model, cluster="dgx-h100", gpus="8,16", global_batch="16", seq_len=1024, **fixed)
    eight, sixteen = run.result.points
    single = planner.plan(model=tiny_model, cluster="dgx-h100", gpus=8, global_batch=16, seq_len=1024, **fixed)
    assert eight.status == "ok" and run.plan(eight.index).to_json() == single.to_json()
    assert run.result.request.constraints == single.request.constraints and single.config.zero == 1
    assert sixteen.status == "no_plan" and "dp 2 x tp 2 x pp 2 x cp 1 = 8 != 16 GPUs" in sixteen.reason


def test_precision_and_compile_reach_every_point_as_in_a_single_plan(tiny_model: str) -> None:
    """``precision`` and ``compile`` are ``planner.plan``'s, for every point of the grid."""
    options = dict(precision="fp8", compile=True, target="torchtitan")
    run = sweep(model=tiny_model, cluster="dgx-h100", gpus="8", global_batch="16", seq_len=1024, **options)
    (point,) = run.result.points
    single = planner.plan(model=tiny_model, cluster="dgx-h100", gpus=8, global_batch=16, seq_len=1024, **options)
    assert point.status == "ok" and run.plan(point.index).to_json() == single.to_json()
    assert single.config.precision == "fp8" and single.config.compile is True


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(precision="fp8"), "precision fp8: GPU a100-80gb has no FP8 tensor cores"),
    (dict(precision="fp4"), "precision must be bf16 or fp8"),
    (dict(compile="yes"), "compile must be True, False or None"),
])
def test_engine_options_a_grid_cannot_take_are_input_errors(tiny_model: str, kwargs: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        sweep(model=tiny_model, cluster="dgx-h100,dgx-a100", gpus="8", global_batch="16", seq_len=1024, **kwargs)


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(tp=3), "tp 3 does not divide 4 attention"),
    (dict(vpp=2, schedule="gpipe"), "vpp 2 needs schedule interleaved-1f1b"),
    (dict(top_k=-1), "top-k must be an integer"),
])
def test_constraints_that_no_point_can_keep_are_input_errors(tiny_model: str, kwargs: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        sweep(model=tiny_model, cluster="dgx-h100", gpus="8", global_batch="16", seq_len=1024, **kwargs)


def test_planner_sweep_is_the_api_before_and_after_the_package_loads() -> None:
    """``planner.sweep(...)`` is the same function whether or not ``planner.capacity`` has loaded."""
    import subprocess
    import sys

    code = ("import planner, sys; assert 'planner.capacity' not in sys.modules; f = planner.sweep\n"
            "import planner.capacity.grid\n"
            "for call in (f, planner.sweep):\n"
            "    try:\n        call(model='llama3.1-8b', cluster='dgx-h100', gpus='9', global_batch=8, seq_len=8)\n"
            "    except planner.InputError as err:\n        print(err)\n"
            "print(planner.sweep is f)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == out[1] and "does not fill whole dgx-h100 nodes" in out[0] and out[2] == "True"


def test_deadline_answer_is_the_fewest_gpus_in_time_per_cluster(tiny_sweep) -> None:
    from planner.capacity.api import parse_grid
    from planner.capacity.assemble import _deadline

    points = tiny_sweep.result.points
    by = {(p.cluster, p.gpus): p for p in points}
    # a deadline only the faster dgx-a100 point meets
    faster = min((by["dgx-a100", 8], by["dgx-a100", 16]), key=lambda p: p.time_to_train_s)
    limit = faster.time_to_train_s
    marked = [p.model_copy(update={"meets_deadline": p.time_to_train_s <= limit}) for p in points]
    g = parse_grid(cluster="dgx-h100,dgx-a100", gpus="8,16", global_batch="16", seq_len=1024, tokens="20B", deadline=limit)
    answers = {a.cluster: a for a in _deadline(marked, g)}
    assert answers["dgx-a100"].gpus == faster.gpus and answers["dgx-a100"].cost_usd == faster.cost_usd
    assert answers["dgx-a100"].point == faster.index
    in_time = [n for n in (8, 16) if by["dgx-h100", n].time_to_train_s <= limit]
    assert answers["dgx-h100"].gpus == (in_time[0] if in_time else None)


def test_csv_has_one_row_per_point_with_the_mesh(tiny_sweep) -> None:
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(tiny_sweep.result.to_csv())))
    assert [int(r["gpus"]) for r in rows] == [p.gpus for p in tiny_sweep.result.points]
    for row, p in zip(rows, tiny_sweep.result.points):
        assert float(row["step_time_s"]) == p.step_time_s and int(row["tp"]) == p.mesh["tp"] and row["cluster"] == p.cluster


def test_a_deadline_nobody_meets_names_the_fastest_point(tiny_sweep) -> None:
    from planner.capacity.result import DeadlineAnswer, duration

    result = tiny_sweep.result
    assert result.deadline_miss() is None  # no deadline asked
    missed = result.model_copy(update={
        "request": result.request.model_copy(update={"deadline_s": 3600.0}),
        "deadline": [DeadlineAnswer(cluster=c, point=None, gpus=None, time_to_train_days=None, cost_usd=None) for c in result.request.clusters]})
    fastest = min(result.points, key=lambda p: p.time_to_train_s)
    line = missed.deadline_miss()
    assert line.startswith(f"no point trains within the deadline of 1.0 hours; closest: {fastest.cluster}, {fastest.gpus} GPUs, batch 16")
    assert f": {duration(fastest.time_to_train_s)} ({duration(fastest.time_to_train_s - 3600)} over)" in line
