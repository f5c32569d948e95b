"""The whole loop on CPU, small (``bench/calibration_loop.py`` is the full one): ``meshplan profile
--device cpu`` on two gloo ranks under torchrun (its file checked against nccl-tests' conventions), ``meshplan plan`` + ``torchrun ... meshplan run`` for a few shapes of
a tiny Llama, ``meshplan calibrate`` on some of the records, and the held-out shape predicted with the
calibrated cluster. The held-out error against the 20 % target is timing on a shared machine, so
``bench/calibration_loop.py`` prints it; this test checks that every stage of the loop works."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

import planner
from costmodel.headroom import usable_gib
from planner.runtime.profile.collectives import BUS_FACTOR, OPS
from profiles import load_cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import calibration_loop as loop  # noqa: E402

FIT = [
    loop.Shape("llama-128", 1, 1, 1, 0, 4, 4, 64), loop.Shape("llama-128", 2, 1, 1, 0, 2, 4, 128),
    loop.Shape("llama-256", 2, 1, 1, 0, 1, 2, 64),
]
HELD_OUT = [loop.Shape("llama-256", 1, 1, 1, 0, 2, 2, 128)]


def test_profile_run_calibrate_predicts_a_held_out_shape(tmp_path: Path) -> None:
    result = loop.run_loop(tmp_path, 2, FIT, HELD_OUT, steps=4, warmup=1, quick=True, params=["compute", "step_fixed"])
    assert len(result.fit) == 3 and len(result.held_out) == 1
    assert all(loso is not None for *_, loso in result.fit)
    print(loop.report(result))
    # The loop's figures are timings of a shared CPU: the held-out target is bench/calibration_loop.py's
    # to print, not a unit test's to assert (a timed assertion flakes). Here: every stage ran and the
    # calibrated cluster is one that plan / estimate accept, with finite, positive factors.
    assert set(result.factors) == {"compute", "step_fixed"}
    assert all(math.isfinite(v) and v > 0 for v in result.factors.values())
    assert all(math.isfinite(e) for *_, before, after in result.held_out for e in (before, after))
    assert planner.estimate(model="gpt-1.7b", cluster=str(tmp_path / "calibrated.json"), gpus=2, global_batch=4,
                            seq_len=128, zero=0).step_time_s > 0
    _check_two_rank_profile(tmp_path / "cpu_cluster.json")


def _check_two_rank_profile(path: Path) -> None:
    """The loop's first step: every collective at every size, nccl-tests' algbw / busbw, the model's time."""
    cluster = load_cluster(path)
    assert cluster.gpus_per_node == 2 and 0 < cluster.efficiency.intra_node <= 1
    rows = json.loads(path.read_text())["measurements"]["collectives"]
    sizes = sorted({r["bytes"] for r in rows})
    assert len(sizes) >= 3 and sorted((r["op"], r["bytes"]) for r in rows) == sorted((op, b) for op in OPS for b in sizes)
    for r in rows:
        assert r["scope"] == "intra_node" and r["ranks"] == 2 and r["model_s"] > 0
        assert r["algbw_gbps"] == pytest.approx(r["bytes"] / r["time_s"] / 1e9)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * BUS_FACTOR[r["op"]](2))
    est = planner.estimate(model="gpt-1.7b", cluster=str(path), gpus=2, global_batch=4, seq_len=128, zero=0)
    assert est.step_time_s > 0 and est.memory_capacity_gib == pytest.approx(usable_gib(cluster))  # capacity less the measured headroom
