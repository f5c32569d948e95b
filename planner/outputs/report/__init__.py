"""Plan reports: what a reviewer reads, as Markdown (code review) or one self-contained HTML file.

``render_report(plan, "md")`` collects the plan's facts, re-estimates what the plan file does not
record (per-stage memory, the runners-up's time split, sensitivity; they need the model, rebuilt from
``plan.model.arg``) and every engine's launcher fragment, then renders them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.errors import InputError

if TYPE_CHECKING:
    from costmodel.specs import ModelSpec
    from planner.plans.schema import Plan

FORMATS = ("md", "html")


def render_report(plan: Plan, format: str = "md", model: ModelSpec | None = None, reestimate: bool = True) -> str:
    """The report text in ``format`` (``md`` or ``html``)."""
    if format not in FORMATS:
        raise InputError(f"unknown report format {format!r}; use md or html")
    if plan.hetero is not None:  # a mixed or degraded cluster: the stage / replica map
        from planner.outputs.report.hetero import render_html, render_markdown

        return render_markdown(plan) if format == "md" else render_html(plan)
    from planner.outputs.report.data import collect

    data = collect(plan, model, reestimate)
    if format == "md":
        from planner.outputs.report.markdown import render

        return render(data)
    from planner.outputs.report.html import render as render_html

    return render_html(data)
