"""Render the HTML report in headless Chromium (Debian's ``chromium``, installed by ``.ci/run``) and
check the screenshot is a page, not a blank: text, the SVG charts' colours, enough ink.

The PNG is decoded with the standard library (zlib + struct, PNG specification section 9 filters),
so the test needs no imaging package. A missing browser fails the test: CI installs it.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

import planner

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync")
WIDTH, HEIGHT = 1280, 2000
CHART_BLUE, CHART_RED = (0x4C, 0x78, 0xA8), (0xE4, 0x57, 0x56)
"""Bar colours of the alternatives chart, on the first screen (``planner.outputs.report.charts``)."""


def decode_png(data: bytes) -> tuple[int, int, list[bytes], int]:
    """Width, height, unfiltered rows and bytes per pixel of an 8-bit RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos: pos + 4])
        kind, body = data[pos + 4: pos + 8], data[pos + 8: pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, f"unexpected PNG format {header}"
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1: start + 1 + stride])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def pixels(rows: list[bytes], bpp: int, step: int = 2):
    """Every ``step``-th pixel of every ``step``-th row, as (r, g, b)."""
    for row in rows[::step]:
        for x in range(0, len(row), bpp * step):
            yield row[x], row[x + 1], row[x + 2]


def near(p: tuple[int, int, int], q: tuple[int, int, int], tolerance: int = 12) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(p, q))


def screenshot(html: Path, png: Path, profile: Path) -> None:
    browser = shutil.which("chromium")
    if browser is None:
        pytest.fail("chromium is not installed: run `apt-get update && apt-get install -y chromium` (.ci/run does)")
    cmd = [browser, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={WIDTH},{HEIGHT}", html.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and png.exists(), f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}"


def test_report_renders_in_headless_chromium(llama_plan, tmp_path: Path) -> None:
    html, png = tmp_path / "report.html", tmp_path / "report.png"
    html.write_text(planner.report(llama_plan, "html"), encoding="utf-8")
    screenshot(html, png, tmp_path / "profile")
    width, height, rows, bpp = decode_png(png.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    sample = list(pixels(rows, bpp))
    ink = sum(1 for p in sample if sum(p) < 600) / len(sample)
    dark = sum(1 for p in sample if max(p) < 90) / len(sample)
    assert ink > 0.03, f"only {ink:.1%} of the page is not white: blank render?"
    assert dark > 0.003, f"only {dark:.2%} of the pixels are dark: no text rendered?"
    assert len(set(sample)) > 50, "too few colours for text, tables and charts"
    assert any(near(p, CHART_BLUE) for p in sample) and any(near(p, CHART_RED) for p in sample), "the SVG chart colours are missing"


def test_blank_page_fails_the_check(tmp_path: Path) -> None:
    """The check above can fail: an empty page has no ink."""
    html, png = tmp_path / "blank.html", tmp_path / "blank.png"
    html.write_text("<!DOCTYPE html><html><body></body></html>")
    screenshot(html, png, tmp_path / "profile")
    _, _, rows, bpp = decode_png(png.read_bytes())
    sample = list(pixels(rows, bpp, step=8))
    assert sum(1 for p in sample if sum(p) < 600) / len(sample) < 0.001
