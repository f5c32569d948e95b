"""The memory headroom (``costmodel.headroom``): its default derives from the measured figures in
``profiles/memory_headroom.json``, every cluster preset states it with its source, a plan fits only if
its prediction plus the headroom fits, ``--memory-headroom`` replaces the cluster's figure, and
``estimate`` says "does not fit" with the shortfall when the headroom is what tips it."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

import planner
from costmodel.headroom import DEFAULT_HEADROOM_FRACTION, headroom_gib, usable_gib, with_headroom
from planner.cli._summary import memory_verdict
from profiles import list_clusters, load_cluster

DATA = Path(__file__).resolve().parents[2] / "profiles" / "memory_headroom.json"


def test_default_fraction_is_the_median_of_the_measured_reserve() -> None:
    data = json.loads(DATA.read_text())
    shares = [(r["reserved_gib"] - r["allocated_gib"]) / data["capacity_gib"] for r in data["bf16_rows"]]
    assert DEFAULT_HEADROOM_FRACTION == round(statistics.median(shares), 4)


def test_every_preset_states_its_headroom_with_a_source() -> None:
    raw = json.loads((DATA.parent / "clusters.json").read_text())["clusters"]
    for cluster in list_clusters():
        assert cluster.memory_headroom_gib == pytest.approx(DEFAULT_HEADROOM_FRACTION * cluster.gpu.hbm_gib, abs=0.006), cluster.name
        assert "memory_headroom.json" in raw[cluster.name]["sources"]["memory_headroom_gib"]
        assert usable_gib(cluster) == pytest.approx(cluster.gpu.hbm_gib - cluster.memory_headroom_gib)


def test_a_cluster_file_without_it_gets_the_measured_default(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"gpu": "h100-sxm", "gpus_per_node": 8, "intra_node_bandwidth_gbps": 450, "network_bandwidth_gbps": 50,
                                "intra_node_latency_us": 2.0, "network_latency_us": 4.0,
                                "efficiency": {"intra_node": 0.8, "network": 0.9, "overlap_slowdown": 0.15}}))
    cluster = load_cluster(str(path))
    assert cluster.memory_headroom_gib is None
    assert headroom_gib(cluster) == pytest.approx(DEFAULT_HEADROOM_FRACTION * cluster.gpu.hbm_gib)
    assert usable_gib(with_headroom(cluster, 4.0)) == pytest.approx(cluster.gpu.hbm_gib - 4.0)
    assert with_headroom(cluster, None) is cluster


RUN = dict(model="llama3.1-8b", gpus=8, global_batch=16, seq_len=8192)


@pytest.mark.parametrize("headroom", [None, 0.0, 20.0])
def test_the_plan_keeps_the_headroom_free(headroom: float | None) -> None:
    plan = planner.plan(cluster="dgx-h100", memory_headroom_gib=headroom, **RUN)
    kept = headroom_gib(plan.cluster)
    assert kept == (headroom_gib(load_cluster("dgx-h100")) if headroom is None else headroom)
    assert plan.estimate.memory_headroom_gib == kept
    assert plan.estimate.peak_memory_gib + kept <= plan.cluster.gpu.hbm_gib
    assert all(a.peak_memory_gib + kept <= plan.cluster.gpu.hbm_gib for a in plan.alternatives if a.fits)


def test_estimate_says_does_not_fit_when_the_headroom_tips_it() -> None:
    """A configuration whose prediction fits the GPU but not with the headroom kept free."""
    cluster = load_cluster("dgx-h100")
    base = planner.estimate(cluster=with_headroom(cluster, 0.0), tp=1, micro_batch=1, zero=3, recompute="full", **RUN)
    assert base.fits
    tight = with_headroom(cluster, cluster.gpu.hbm_gib - base.peak_memory_gib + 0.5)
    result = planner.estimate(cluster=tight, tp=1, micro_batch=1, zero=3, recompute="full", **RUN)
    assert not result.fits and result.over_by_gib == pytest.approx(0.5, abs=1e-6)
    verdict = memory_verdict(result.model_dump())
    assert verdict.startswith("does not fit: over by 0.50 GiB with") and "GiB of headroom kept free" in verdict
