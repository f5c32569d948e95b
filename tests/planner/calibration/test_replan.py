"""``meshplan replan`` (issue 22): speeds inferred from per-rank times, noise handled, re-plan and gain."""

from __future__ import annotations

from pathlib import Path

import pytest

import planner
from planner.calibration.replan import infer_speeds, replan
from planner.errors import InputError
from planner.plans.named_model import plan_model
from planner.runtime.rank_times import RankTime
from planner.runtime.record import (
    Comparison,
    Environment,
    ModelRun,
    PlanSummary,
    RunRecord,
    StepTimeStats,
)

DATA = Path(__file__).parents[1] / "runtime" / "data"
MODEL, CLUSTER = str(DATA / "tiny-llama.json"), str(DATA / "laptop-cpu-4.json")


def record(plan, busy: dict[int, list[float]], counts: list[int] | None = None, warmup: int = 1) -> RunRecord:
    """A run record of ``plan`` whose rank r computed ``busy[r]`` seconds per step (half of it an
    injected wait for rank 3)."""
    counts = counts or [plan.schedule.num_microbatches] * len(busy)
    ranks = [RankTime(rank=r, gpu=r, group=0, micro_batches=counts[r], injected_speed=1.0,
                      compute_s=[b / 2 for b in s] if r == 3 else s, wait_s=[b / 2 for b in s] if r == 3 else [0.0] * len(s),
                      sync_s=[0.0] * len(s)) for r, s in busy.items()]
    none = Comparison(measured=None, predicted=None, error=None)
    steps = len(next(iter(busy.values())))
    summary = PlanSummary(summary="", model_arg=plan.model.arg, cluster_name="", cluster={}, gpus=4, global_batch=plan.request.global_batch,
                          seq_len=plan.request.seq_len, micro_batch=1, num_microbatches=1, schedule="1f1b", virtual_stages=1, mesh={},
                          stage_layers=[], config={}, estimate={})
    return RunRecord(plan=summary, model=ModelRun(arg="", name="", num_layers=0, params=0, dtype="float32"), world_size=4,
                     env=Environment(torch_version="", python_version="", platform="", backend="gloo", device_type="cpu",
                                     device_names=[], hostnames=[]),
                     seed=0, steps=steps, warmup=warmup, losses=[0.0] * steps,
                     step_time=StepTimeStats(median_s=1, min_s=1, max_s=1, spread=0, timed_steps=steps, warmup_steps=0, all_steps_s=[1.0] * steps),
                     step_time_s=none, tokens_per_s=none, mfu=none, peak_memory_gib=none, rank_times=ranks)


@pytest.fixture(scope="module")
def uniform():
    return planner.plan(model=MODEL, cluster=CLUSTER, gpus=4, global_batch=32, seq_len=64, tp=1, pp=1, dp=4, micro_batch=1, top_k=0)


def test_the_median_ignores_an_outlier_step_and_small_differences_count_as_healthy(uniform) -> None:
    busy = {0: [9.0, 1.0, 1.0, 5.0, 1.0], 1: [1.0, 1.05, 1.06, 1.04, 1.05], 2: [1.0, 1.0, 1.0, 1.0, 1.0], 3: [1.0, 2.0, 2.1, 1.9, 2.0]}
    assert infer_speeds(record(uniform, busy)) == {0: 1.0, 1: 1.0, 2: 1.0, 3: 0.5}


def test_a_record_without_rank_times_is_bad_input(uniform) -> None:
    bare = record(uniform, {0: [1.0], 1: [1.0], 2: [1.0], 3: [1.0]}).model_copy(update={"rank_times": None})
    with pytest.raises(InputError, match="per-rank times"):
        infer_speeds(bare)


def test_a_record_of_pipeline_stages_is_refused_in_one_line(uniform) -> None:
    """Stages of different layers are busy for different times at one speed: no speed can be read off."""
    rec = record(uniform, {r: [1.0] for r in range(4)})
    staged = rec.model_copy(update={"rank_times": [t.model_copy(update={"layers": [0]}) for t in rec.rank_times]})
    with pytest.raises(InputError, match="pipeline stages"):
        infer_speeds(staged)


def test_replan_shrinks_the_slow_gpu_share_and_predicts_a_gain(uniform) -> None:
    busy = {r: [1.0] * 4 for r in range(3)} | {3: [2.0] * 4}
    done = replan(uniform, plan_model(uniform), record(uniform, busy))
    assert done.speeds[3] == 0.5 and done.gain > 1.2
    shares = {tuple(r.stages[0].devices): r.micro_batches for r in done.plan.hetero.replicas}
    assert shares.get((3,), 0) < shares[(0,)]
