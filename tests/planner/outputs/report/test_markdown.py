"""The Markdown report: every section, the runner-up comparison, fragments, valid tables."""

from __future__ import annotations

import pytest

import planner
from planner.outputs.report import render_report
from planner.outputs.report.markdown import table

SECTIONS = ("## Summary", "## Why this plan", "### Chosen plan and runner-up side by side", "### Alternatives",
            "## Mesh and rank layout", "## Pipeline stages", "## Where the time goes", "## Memory", "## Pipeline schedule",
            "## Sensitivity", "## Search", "## Inputs", "## Assumptions", "## Glossary", "## Formulas", "## Launcher fragments")


@pytest.fixture(scope="module")
def md(llama_plan) -> str:
    return planner.report(llama_plan, "md")


def test_every_section_in_order(md: str) -> None:
    positions = [md.index(s) for s in SECTIONS]
    assert positions == sorted(positions)


def test_reader_can_tell_why_the_plan_won(md: str, llama_plan) -> None:
    alt = llama_plan.alternatives[0]
    assert "| cp | 2 | 4 | differs |" in md and "| dp | 4 | 2 | differs |" in md
    assert alt.summary in md and "the largest increase is" in md


def test_tables_have_consistent_columns(md: str) -> None:
    for block in md.split("\n\n"):
        lines = [x for x in block.splitlines() if x.startswith("|")]
        if len(lines) >= 2:
            widths = {len(x.replace("\\|", "").split("|")) for x in lines}
            assert len(widths) == 1, lines[0]


def test_fragments_and_refusals(md: str, plan_factory) -> None:
    """The fixture's FSDP plan with pp 4 and cp 2 has no Megatron-LM launcher (Megatron FSDP runs
    without pipelining) nor a DeepSpeed one (no cp): both are named; a plan Megatron-LM runs gets its
    argument fragment."""
    assert "Not expressible: cannot export to megatron: mesh.zero" in md
    assert "Not expressible: cannot export to deepspeed: mesh.cp" in md
    expressible = plan_factory("llama3.1-8b", "dgx-h100", (), target="native", tp=2, pp=2, dp=4, sp=True, zero=1, global_batch=64, seq_len=4096)
    fragments = planner.report(expressible, "md")
    assert "```bash" in fragments and "--tensor-model-parallel-size 2" in fragments


def test_timeline_block(md: str) -> None:
    block = md[md.index("## Pipeline schedule"):md.index("## Sensitivity")]
    rows = [x for x in block.splitlines() if x.startswith("rank ")]
    assert len(rows) == 4 and all("f" in r and "B" in r for r in rows)


def test_table_escapes_pipes() -> None:
    assert table(["a"], [["x|y"]]).splitlines()[-1] == "| x\\|y |"


def test_no_reestimate_still_reports(llama_plan) -> None:
    md = render_report(llama_plan, "md", reestimate=False)
    assert "Not available: re-estimates were turned off." in md and "## Launcher fragments" in md
