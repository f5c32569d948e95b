"""Line charts of sweep figures against the GPU count (log2 axis), drawn as inline SVG with the plan
report's writer (``planner.outputs.report.svg``): one line per series, a hover title on every point."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from planner.outputs.report.svg import PALETTE, Svg, nice_step

WIDTH, HEIGHT = 980, 300
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 48, 40


@dataclass(frozen=True)
class Series:
    """One line: a label and its (GPUs, value) points in increasing GPU order."""

    label: str
    points: tuple[tuple[int, float], ...]


def _x_axis(xs: Sequence[int]) -> Callable[[float], float]:
    lo, hi = math.log2(min(xs)), math.log2(max(xs))
    span = (hi - lo) or 1.0
    return lambda x: LEFT + 10 + (WIDTH - LEFT - RIGHT - 20) * ((math.log2(x) - lo) / span if hi > lo else 0.5)


def _y_axis(values: Sequence[float], log: bool) -> tuple[Callable[[float], float], list[float]]:
    """Screen y of a value, and the tick values."""
    plot = HEIGHT - TOP - BOTTOM
    if log:
        lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
        hi = hi if hi > lo else lo + 1
        return (lambda v: HEIGHT - BOTTOM - plot * (math.log10(v) - lo) / (hi - lo)), [10.0 ** k for k in range(lo, hi + 1)]
    top = max(values) * 1.1 or 1.0
    step = nice_step(top)
    ticks = [step * k for k in range(int(top / step) + 1)]
    return (lambda v: HEIGHT - BOTTOM - plot * v / top), ticks


def line_chart(title: str, series: Sequence[Series], y_label: str, fmt: Callable[[float], str], log_y: bool = False) -> str:
    """The chart as one ``<svg>`` element (an empty-state note when no series has a point)."""
    svg = Svg(WIDTH, HEIGHT + 24 + 18 * (len(series) // 5), title)
    xs = sorted({x for s in series for x, _ in s.points})
    values = [v for s in series for _, v in s.points if v > 0 or not log_y]
    svg.text(0, 16, title, bold=True)
    if not xs or not values:
        svg.text(LEFT, HEIGHT / 2, "no point of the sweep has this figure", fill="#666")
        return svg.render()
    x_of = _x_axis(xs)
    y_of, ticks = _y_axis(values, log_y)
    for tick in ticks:
        svg.line(LEFT, y_of(tick), WIDTH - RIGHT, y_of(tick), "#e5e5e5")
        svg.text(LEFT - 6, y_of(tick) + 4, fmt(tick), size=10, anchor="end")
    for x in xs:
        svg.text(x_of(x), HEIGHT - BOTTOM + 16, f"{x:,}", size=10, anchor="middle")
    svg.text((LEFT + WIDTH) / 2, HEIGHT - 6, "GPUs", size=11, anchor="middle")
    svg.text(4, TOP - 14, y_label, size=11)
    for k, s in enumerate(series):
        colour = PALETTE[k % len(PALETTE)]
        shown = [(x, v) for x, v in s.points if v > 0 or not log_y]
        for (x1, v1), (x2, v2) in zip(shown, shown[1:]):
            svg.line(x_of(x1), y_of(v1), x_of(x2), y_of(v2), colour, width=2)
        for x, v in shown:
            svg.rect(x_of(x) - 4, y_of(v) - 4, 8, 8, colour, f"{s.label}, {x:,} GPUs: {fmt(v)}")
    svg.legend(LEFT, HEIGHT + 16, [(PALETTE[k % len(PALETTE)], s.label) for k, s in enumerate(series)])
    return svg.render()
