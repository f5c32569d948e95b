"""The sweep report: one self-contained page with the scaling charts and a link per plan, rendered in
headless Chromium like the plan report (``tests/planner/outputs/report/test_html_browser.py``)."""

from __future__ import annotations

import re
from pathlib import Path

from planner.outputs.report.svg import PALETTE
from planner.capacity.report import plan_files, render
from tests.planner.outputs.report.test_html_browser import WIDTH, decode_png, near, pixels, screenshot


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i: i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def test_page_is_self_contained_with_charts_and_plan_links(tiny_sweep, tmp_path: Path) -> None:
    links = plan_files(tiny_sweep.result, tmp_path / "sweep.html")
    html = render(tiny_sweep.result, links)
    assert "<script" not in html and not re.search(r"(src|href)=\"https?:", html)
    for title in ("Throughput", "Model FLOPs utilisation", "Scaling efficiency", "Memory headroom", "Time to train", "Cost"):
        assert f'aria-label="{title}"' in html
    hrefs = re.findall(r'<a href="([^"#]+)"', html)
    assert sorted(hrefs) == sorted(v[1] for v in links.values()) and len(hrefs) == len(tiny_sweep.result.points)
    assert all(h.startswith("sweep_plans/") and h.endswith(".html") for h in hrefs)
    # every point's hover title names its cluster, GPU count and value
    assert "dgx-a100, seq 1024, batch 16, 16 GPUs:" in html and "dgx-h100, seq 1024, batch 16, 8 GPUs:" in html


def test_sweep_report_renders_in_headless_chromium(tiny_sweep, tmp_path: Path) -> None:
    """Mostly white charts: less ink than the plan report, still far from a blank page (< 0.1 %)."""
    html, png = tmp_path / "sweep.html", tmp_path / "sweep.png"
    html.write_text(render(tiny_sweep.result, plan_files(tiny_sweep.result, html)), encoding="utf-8")
    screenshot(html, png, tmp_path / "profile")
    width, _, rows, bpp = decode_png(png.read_bytes())
    assert width == WIDTH
    sample = list(pixels(rows, bpp))
    ink = sum(1 for p in sample if sum(p) < 600) / len(sample)
    dark = sum(1 for p in sample if max(p) < 90) / len(sample)
    assert ink > 0.01 and dark > 0.002, f"ink {ink:.1%}, dark {dark:.2%}: blank render?"
    first, second = _rgb(PALETTE[0]), _rgb(PALETTE[1])  # the two clusters' lines
    assert any(near(p, first) for p in sample) and any(near(p, second) for p in sample), "the chart lines are missing"
