"""The serving HTML report: content checks, and a render in headless Chromium like the training report."""

from __future__ import annotations

from pathlib import Path

from planner.serving.report import CHOSEN, render_serving_html
from planner.serving.schema import ServingPlan
from tests.planner.outputs.report.test_html_browser import decode_png, near, pixels, screenshot

CHOSEN_RGB = tuple(int(CHOSEN[i: i + 2], 16) for i in (1, 3, 5))
WEIGHTS_BLUE = (0x4C, 0x78, 0xA8)
KV_GREEN = (0x54, 0xA2, 0x4B)


def test_report_shows_deployment_frontier_and_memory(llama_serving_plan: ServingPlan) -> None:
    html = render_serving_html(llama_serving_plan)
    assert html.count("<svg") == 2 and "<script" not in html
    assert "chosen deployment" in html and "Pareto frontier" in html
    for group in llama_serving_plan.estimate.deployment.groups:
        assert f"<td>{group.role}</td>" in html
        assert f"{group.memory_gib.weights:.2f}" in html
    assert html == render_serving_html(llama_serving_plan)


def test_report_renders_in_headless_chromium(llama_serving_plan: ServingPlan, tmp_path: Path) -> None:
    html, png = tmp_path / "serving.html", tmp_path / "serving.png"
    html.write_text(render_serving_html(llama_serving_plan), encoding="utf-8")
    screenshot(html, png, tmp_path / "profile")
    _, _, rows, bpp = decode_png(png.read_bytes())
    sample = list(pixels(rows, bpp))
    ink = sum(1 for p in sample if sum(p) < 600) / len(sample)
    assert ink > 0.03, f"only {ink:.1%} of the page is not white: blank render?"
    assert any(near(p, CHOSEN_RGB) for p in sample), "the chosen point's colour is missing"
    assert any(near(p, WEIGHTS_BLUE) for p in sample) and any(near(p, KV_GREEN) for p in sample), "memory bars missing"
