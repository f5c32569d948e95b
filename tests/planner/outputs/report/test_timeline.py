"""The schedule simulation reproduces the textbook bubbles and respects every dependency."""

from __future__ import annotations

import pytest

from costmodel.pipeline import pipeline_time
from planner.outputs.report.timeline import FORWARD_SHARE, rank_order, shown_microbatches, simulate


@pytest.mark.parametrize(("schedule", "pp", "vpp", "m"), [
    ("1f1b", 4, 1, 8), ("gpipe", 4, 1, 8), ("interleaved-1f1b", 4, 2, 8), ("interleaved-1f1b", 2, 4, 4), ("1f1b", 1, 1, 3),
])
def test_equal_stages_take_the_analytic_time(schedule: str, pp: int, vpp: int, m: int) -> None:
    """p equal stages: (m + (p - 1)/v) x per-micro-batch time (Narayanan et al. 2021 section 2.2),
    what costmodel.pipeline.pipeline_time prices."""
    ops = simulate(schedule, [1.0] * pp, vpp, m)
    total, _ = pipeline_time([1.0] * pp, m, vpp, schedule)
    assert max(o.end for o in ops) == pytest.approx(total)


@pytest.mark.parametrize(("schedule", "vpp"), [("1f1b", 1), ("gpipe", 1), ("interleaved-1f1b", 2), ("zb-h1", 1)])
def test_every_pass_once_and_dependencies_hold(schedule: str, vpp: int) -> None:
    pp, m, times = 4, 8, [1.0, 1.3, 0.9, 1.1]
    ops = simulate(schedule, times, vpp, m)
    chunks = vpp if schedule == "interleaved-1f1b" else 1
    assert len(ops) == 2 * pp * chunks * m
    end = {(o.kind, o.microbatch, o.chunk * pp + o.rank): o.end for o in ops}
    for o in ops:
        stage = o.chunk * pp + o.rank
        if o.kind == "F" and stage > 0:
            assert o.start >= end[("F", o.microbatch, stage - 1)] - 1e-12
        if o.kind == "B":
            dep = ("B", o.microbatch, stage + 1) if stage < chunks * pp - 1 else ("F", o.microbatch, stage)
            assert o.start >= end[dep] - 1e-12
        share = FORWARD_SHARE if o.kind == "F" else 1 - FORWARD_SHARE
        assert o.end - o.start == pytest.approx(share * times[o.rank] / chunks)
    for r in range(pp):
        mine = sorted((o for o in ops if o.rank == r), key=lambda o: o.start)
        assert all(a.end <= b.start + 1e-12 for a, b in zip(mine, mine[1:]))


def test_1f1b_warm_up() -> None:
    assert rank_order("1f1b", 0, 4, 1, 6)[:4] == [("F", 0, 0), ("F", 1, 0), ("F", 2, 0), ("F", 3, 0)]
    assert rank_order("1f1b", 3, 4, 1, 6)[:2] == [("F", 0, 0), ("B", 0, 0)]


def test_shown_microbatches() -> None:
    assert shown_microbatches("1f1b", 4, 128) == 8
    assert shown_microbatches("1f1b", 4, 3) == 3
    assert shown_microbatches("interleaved-1f1b", 4, 12) == 8
