"""The homogeneous alternatives of a heterogeneous plan (``search.hetero.baselines``)."""

from __future__ import annotations

from costmodel.hetero import ClusterGroup, HeteroCluster
from profiles.degrade import degrade
from search.core import search_plan
from search.hetero.baselines import healthy_local_nodes, homogeneous_baselines, straggler_blind, uniform_layout
from search.types import SearchRequest
from tests.search.hetero.cases import mixed, node, tiny_model

BATCH, SEQ = 16, 1024


def _one_group(gpus: int) -> HeteroCluster:
    return HeteroCluster(name="fast", groups=(ClusterGroup(cluster=node("fast", 300, 4.0, 25), gpus=gpus),))


def test_mixed_types_compare_with_the_fast_group_alone_and_all_as_the_slow_type() -> None:
    model, cluster = tiny_model(), mixed(8, 8, 2.0)
    # no wall-clock limit: the comparison is with unlimited searches (the default 2 s limit is reached
    # on a loaded machine, where the 16-GPU search takes 1.3-2 s, and returns a slower plan)
    got = {b.name: b for b in homogeneous_baselines(model, cluster, BATCH, SEQ, None)}
    assert sorted(got) == ["all-as-slowest", "fastest-group"]
    assert {b.status for b in got.values()} == {"optimal"}
    fast, slow = cluster.groups
    want_fast = search_plan(model, fast.cluster, SearchRequest(gpus=8, global_batch=BATCH, seq_len=SEQ)).best
    want_slow = search_plan(model, slow.cluster, SearchRequest(gpus=16, global_batch=BATCH, seq_len=SEQ)).best
    assert got["fastest-group"].gpus == 8 and got["fastest-group"].step_time_s == want_fast.step_time_s
    assert got["all-as-slowest"].gpus == 16 and got["all-as-slowest"].step_time_s == want_slow.step_time_s
    assert "fast" in got["fastest-group"].label and "slow" in got["all-as-slowest"].label


def test_the_fast_group_alone_keeps_to_its_healthy_nodes() -> None:
    cluster = degrade(mixed(8, 8, 2.0), "node:0=0.5", None)
    assert healthy_local_nodes(cluster.groups[0]) == [1]
    got = {b.name: b for b in homogeneous_baselines(tiny_model(), cluster, BATCH, SEQ)}
    assert got["fastest-group"].gpus == 4 and "healthy" in got["fastest-group"].label


def test_a_slow_gpu_slows_the_straggler_blind_plan() -> None:
    model = tiny_model()
    healthy, slowed = _one_group(8), degrade(_one_group(8), "1=0.5", None)
    blind_healthy = straggler_blind(model, healthy, BATCH, SEQ, 10.0)
    blind_slowed = straggler_blind(model, slowed, BATCH, SEQ, 10.0)
    assert blind_healthy.config == blind_slowed.config  # the same plan: the planner does not see the speed
    assert blind_slowed.step_time_s > blind_healthy.step_time_s
    names = [b.name for b in homogeneous_baselines(model, slowed, BATCH, SEQ)]
    assert names == ["straggler-blind", "healthy-only"]


def test_a_lost_node_leaves_the_straggler_blind_plan_the_gpus_that_are_up() -> None:
    cluster = degrade(_one_group(12), None, "node:1")
    got = {b.name: b for b in homogeneous_baselines(tiny_model(), cluster, BATCH, SEQ)}
    assert got["straggler-blind"].gpus == 8 and got["healthy-only"].gpus == 8


def test_the_uniform_layout_takes_the_gpus_in_order_with_equal_shares() -> None:
    model, cluster = tiny_model(), _one_group(8)
    cfg = search_plan(model, cluster.groups[0].cluster, SearchRequest(gpus=8, global_batch=BATCH, seq_len=SEQ)).best.config
    gpus = [0, 1, 2, 3, 8, 9, 10, 11]
    specs = uniform_layout(cfg, gpus)
    assert len(specs) == cfg.dp and {s.micro_batches for s in specs} == {cfg.num_microbatches}
    assert [d for s in specs for stage in s.stage_devices for d in stage] == gpus[:cfg.dp * cfg.tp * cfg.pp]


def test_a_homogeneous_cluster_has_no_baseline() -> None:
    assert homogeneous_baselines(tiny_model(), _one_group(8), BATCH, SEQ, 10.0) == []


def test_without_a_healthy_node_the_healthy_only_plan_takes_the_full_speed_gpus() -> None:
    cluster = degrade(_one_group(4), "3=0.5", None)  # one node of four, its last GPU slow
    assert healthy_local_nodes(cluster.groups[0]) == []
    got = {b.name: b for b in homogeneous_baselines(tiny_model(), cluster, BATCH, SEQ)}
    assert got["healthy-only"].gpus == 3 and got["healthy-only"].step_time_s is not None
    assert got["healthy-only"].label == "healthy 3 GPUs only"
