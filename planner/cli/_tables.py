"""Tables for the terminal and for pipes: rich on a terminal, plain aligned text otherwise.

Plain text keeps ``meshplan list models | grep llama`` and ``awk`` simple: one header line, then one
line per row, columns padded with spaces, no box drawing and no colour. rich is imported only when a
table is drawn on a terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

_MIN_TEXT_WIDTH = 20
"""Narrowest useful width of a free-text last column on a terminal, in characters."""


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` under ``headers``: a rich table on a terminal, aligned plain text when piped."""
    if sys.stdout.isatty():
        _print_rich(title, headers, rows)
    else:
        sys.stdout.write(plain_table(headers, rows))


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell and separated by two spaces; no trailing blanks."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths)).rstrip() for line in (headers, *rows)
    ]
    return "\n".join(lines) + "\n"


def _print_rich(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Short columns keep their width; the last (free text) wraps, or is left out when it cannot fit."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]
    keep = len(headers) if sum(widths[:-1]) + 2 * len(widths) + _MIN_TEXT_WIDTH <= console.width else -1
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, collapse_padding=True, pad_edge=False
    )
    *cells, text = headers[:keep] if keep > 0 else headers[:-1]
    for header in cells:
        table.add_column(header, no_wrap=True)
    table.add_column(text, no_wrap=keep < 0, ratio=1 if keep > 0 else None)
    for row in rows:
        table.add_row(*(str(cell) for cell in row[: len(cells) + 1]))
    console.print(table)
