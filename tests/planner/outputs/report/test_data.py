"""What the report does when the plan's model cannot be rebuilt, and the fragment order."""

from __future__ import annotations

import pytest

from planner.errors import InputError
from planner.outputs.report import render_report
from planner.outputs.report.data import collect


def test_unresolvable_model_still_reports(llama_plan) -> None:
    moved = llama_plan.model_copy(update={"model": llama_plan.model.model_copy(update={"arg": "/nonexistent/config.json"})})
    data = collect(moved)
    assert not data.whatif.available and "/nonexistent/config.json" in data.whatif.reason
    assert all(f.text is None and "could not be rebuilt" in (f.refused or "") for f in data.fragments)
    md = render_report(moved, "md")
    assert "Per-rank breakdown not available" in md and "## Summary" in md
    assert "Totals only" in render_report(moved, "html")


def test_fragments_put_the_target_first(llama_plan, small_plan) -> None:
    assert [f.target for f in collect(llama_plan, reestimate=False).fragments] == ["torchtitan", "megatron", "deepspeed"]  # its target first
    small = collect(small_plan, reestimate=False).fragments
    assert [f.target for f in small] == ["megatron", "torchtitan", "deepspeed"]
    assert small[1].text is not None and small[1].language == "python"


def test_unknown_format(llama_plan) -> None:
    with pytest.raises(InputError, match="unknown report format"):
        render_report(llama_plan, "pdf")
