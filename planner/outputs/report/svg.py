"""A minimal inline-SVG writer for the HTML report's charts (no external resources, no scripts).

SVG 1.1 elements only (``rect``, ``line``, ``text``, ``title`` for hover tips), sized in user units
with a ``viewBox`` so the charts scale with the page.
"""

from __future__ import annotations

from html import escape

PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac")
"""Tableau 10: distinguishable categorical colours."""
CHAR_WIDTH = 6.4
"""Average advance of an 11 px sans-serif character, for laying out legends without measuring text."""
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif"


class Svg:
    """Collects elements and writes one ``<svg>`` element."""

    def __init__(self, width: float, height: float, label: str) -> None:
        self.width, self.height, self.label = width, height, label
        self.parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, fill: str, tip: str = "", stroke: str = "", opacity: float = 1.0) -> None:
        """A filled rectangle; ``tip`` becomes its hover title."""
        attrs = f'x="{x:.2f}" y="{y:.2f}" width="{max(w, 0):.2f}" height="{max(h, 0):.2f}" fill="{fill}"'
        if stroke:
            attrs += f' stroke="{stroke}" stroke-width="1"'
        if opacity < 1:
            attrs += f' fill-opacity="{opacity:.2f}"'
        inner = f"<title>{escape(tip)}</title>" if tip else ""
        self.parts.append(f"<rect {attrs}>{inner}</rect>" if inner else f"<rect {attrs}/>")

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = "#333", width: float = 1, dash: str = "") -> None:
        """A straight line, optionally dashed (``dash`` as SVG ``stroke-dasharray``)."""
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<line x1="{x1:.2f}" y1="{y1:.2f}" x2="{x2:.2f}" y2="{y2:.2f}" stroke="{stroke}" stroke-width="{width}"{extra}/>')

    def text(self, x: float, y: float, s: str, size: float = 12, anchor: str = "start", fill: str = "#222", bold: bool = False) -> None:
        """Text with its baseline at ``y``."""
        weight = ' font-weight="600"' if bold else ""
        self.parts.append(f'<text x="{x:.2f}" y="{y:.2f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}"{weight}>{escape(s)}</text>')

    def legend(self, x: float, y: float, items: list[tuple[str, str]]) -> float:
        """Colour swatches with labels in a row, wrapping at the right edge; returns the last row's y."""
        cx, cy = x, y
        for colour, label in items:
            step = 17 + CHAR_WIDTH * len(label) + 18
            if cx + step > self.width and cx > x:
                cx, cy = x, cy + 18
            self.rect(cx, cy - 10, 12, 12, colour)
            self.text(cx + 17, cy, label, size=11)
            cx += step
        return cy

    def render(self) -> str:
        """The ``<svg>`` element."""
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width:.0f} {self.height:.0f}" '
                f'width="{self.width:.0f}" height="{self.height:.0f}" role="img" aria-label="{escape(self.label)}" style="{FONT}">')
        return head + f"<title>{escape(self.label)}</title>" + "".join(self.parts) + "</svg>"


def text_colour(fill: str) -> str:
    """Black or white, whichever reads better on ``fill`` (relative luminance, WCAG 2.x)."""
    r, g, b = (int(fill[i: i + 2], 16) / 255 for i in (1, 3, 5))
    return "#111" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 else "#fff"


def shade(colour: str, factor: float) -> str:
    """``colour`` mixed with white (factor < 1 lightens: 0.5 is halfway to white)."""
    r, g, b = (int(colour[i: i + 2], 16) for i in (1, 3, 5))
    mix = [round(255 - (255 - c) * factor) for c in (r, g, b)]
    return "#" + "".join(f"{c:02x}" for c in mix)


def nice_step(top: float, ticks: int = 5) -> float:
    """A round axis step (1, 2 or 5 x 10^k) giving about ``ticks`` ticks up to ``top``."""
    import math

    raw = max(top, 1e-12) / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
