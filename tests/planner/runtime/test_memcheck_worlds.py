"""``check-memory`` on the plans the differential harness draws: tied weights split over tp and pp,
several micro-batches through one chunk, transformers MoE experts, and many checks in one process."""

from __future__ import annotations

from pathlib import Path

import pytest

import planner
from differential_draw import CLUSTER, write_models
from plan_helpers import BATCH, SEQ
from planner.runtime.memcheck.build import start_fake_world, stop_fake_world
from planner.runtime.memcheck.check import check_memory


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_models(tmp_path_factory.mktemp("memcheck-models"))


def _check(model: str, gpus: int, **settings: object) -> list[tuple[int, float]]:
    plan = planner.config_plan(model=model, cluster=CLUSTER, gpus=gpus, global_batch=BATCH, seq_len=SEQ, **settings)
    return [(r.pp_rank, r.measured_peak_gib) for r in check_memory(plan, model=model).ranks]


def test_a_tied_gpt2_is_measured_untied_under_tp_and_pp_with_several_micro_batches(models: dict[str, str]) -> None:
    # tied weights were refused under tp / pp; a chunk's second micro-batch tripped FSDPMemTracker
    ranks = _check(models["gpt2"], 4, tp=2, pp=2, schedule="1f1b", micro_batch=1, sp=True)
    assert [r for r, _ in ranks] == [0, 1] and all(peak > 0 for _, peak in ranks)
    assert _check(models["gpt2"], 1, tp=1, pp=1, micro_batch=2)[0][1] > 0


def test_transformers_moe_experts_are_measured_at_full_depth_and_across_a_pipeline(models: dict[str, str]) -> None:
    # the eager experts' nonzero has no shape on fake or meta tensors
    assert _check(models["mixtral"], 1, tp=1, pp=1, micro_batch=4)[0][1] > 0
    assert [r for r, _ in _check(models["mixtral"], 2, tp=1, pp=2, schedule="gpipe", micro_batch=2)] == [0, 1]


def test_a_new_fake_world_forgets_the_old_worlds_meshes(models: dict[str, str]) -> None:
    import torch

    _check(models["llama"], 2, tp=2, pp=1, micro_batch=4)  # fills DTensor's sharding-propagation cache
    assert torch._C._get_DTensor_sharding_propagator_cache_stats()[1] > 0
    plan = planner.config_plan(model=models["llama"], cluster=CLUSTER, gpus=2, global_batch=BATCH, seq_len=SEQ, tp=2, pp=1)
    start_fake_world(plan)
    try:
        assert torch._C._get_DTensor_sharding_propagator_cache_stats()[1] == 0
    finally:
        stop_fake_world()
