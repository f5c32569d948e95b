"""A small TOML writer for flat job-config sections (the stdlib's ``tomllib`` only reads).

Covers what torchtitan job configs hold: strings, integers, floats, booleans and (nested) arrays of
them, under ``[section]`` tables (TOML v1.0.0, toml.io); strings are basic strings.
"""

from __future__ import annotations

import math
from typing import Any


def dumps(sections: dict[str, dict[str, Any]], header: list[str] | None = None) -> str:
    """TOML text: optional ``#`` comment lines, then one table per section, keys in given order."""
    lines = [f"# {line}" for line in header or []]
    for name, table in sections.items():
        if lines:
            lines.append("")
        lines.append(f"[{name}]")
        lines += [f"{key} = {value(v)}" for key, v in table.items()]
    return "\n".join(lines) + "\n"


SHORT_ESCAPES = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def string(s: str) -> str:
    """A basic string: backslash, quote and control characters (U+0000-U+001F, U+007F) escaped,
    as TOML v1.0.0 requires."""
    out = []
    for ch in s:
        if ch in SHORT_ESCAPES:
            out.append(SHORT_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def value(v: Any) -> str:
    """One TOML value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"TOML value must be finite, got {v!r}")
        return repr(v)
    if isinstance(v, str):
        return string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {type(v).__name__}")
