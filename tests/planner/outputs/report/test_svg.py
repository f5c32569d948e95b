"""The SVG writer escapes text and lays out legends inside the drawing."""

from __future__ import annotations

from xml.etree import ElementTree

from planner.outputs.report.svg import Svg, nice_step, shade, text_colour


def test_svg_is_well_formed_and_escaped() -> None:
    svg = Svg(200, 100, "a <chart> & more")
    svg.rect(0, 0, 10, 10, "#4c78a8", tip="x < y")
    svg.text(5, 5, "a & b")
    svg.line(0, 0, 10, 10, dash="4 2")
    root = ElementTree.fromstring(svg.render())
    assert root.tag.endswith("svg") and root.attrib["viewBox"] == "0 0 200 100"
    assert "a & b" in "".join(root.itertext())


def test_legend_wraps_within_the_width() -> None:
    svg = Svg(300, 100, "legend")
    y = svg.legend(10, 20, [("#000000", "a fairly long label"), ("#ffffff", "another long label"), ("#888888", "third")])
    assert y > 20


def test_colours_and_steps() -> None:
    assert text_colour("#ffffff") == "#111" and text_colour("#000000") == "#fff"
    assert shade("#000000", 0.5) == "#808080"
    assert nice_step(80) == 20 and nice_step(7.3) == 2 and nice_step(0.9) == 0.2
