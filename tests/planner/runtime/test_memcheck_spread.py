"""The check-memory error distribution the benches print (``planner.runtime.memcheck.spread``)."""

from __future__ import annotations

from planner.runtime.memcheck.spread import Checked, spread_lines


def test_rank_kinds_and_the_band() -> None:
    assert Checked("a", 0, 1, 10.0, 10.5).kind == "whole model"
    assert [Checked("a", r, 4, 1.0, 1.0).kind for r in range(4)] == ["first stage", "middle stage", "middle stage", "last stage"]
    assert Checked("a", 0, 1, 10.0, 10.99).within and not Checked("a", 0, 1, 10.0, 11.1).within
    assert Checked("a", 0, 1, 10.0, 9.71).within and not Checked("a", 0, 1, 10.0, 9.6).within


def test_lines_name_the_worst_over_and_under_per_kind() -> None:
    rows = [Checked("p1", 0, 1, 10.0, 10.5), Checked("p2", 0, 1, 10.0, 9.9), Checked("p3", 0, 2, 10.0, 9.5), Checked("p3", 1, 2, 10.0, 10.2)]
    lines = spread_lines(rows)
    assert lines[-1].startswith("all rank kinds: 4 measured, error min -5.0% / median +0.5% / max +5.0%")
    whole = next(x for x in lines if x.startswith("whole model"))
    assert "worst over +5.0% (p1, rank 0), worst under -1.0% (p2, rank 0); 0 outside" in whole
    assert "1 outside" in next(x for x in lines if x.startswith("first stage"))
    assert spread_lines([]) == ["no rank measured"]
