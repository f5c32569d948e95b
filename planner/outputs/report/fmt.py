"""Number formatting shared by the Markdown and HTML reports (units always shown)."""

from __future__ import annotations


def seconds(x: float) -> str:
    """``50.018 s``, ``12.3 ms``, ``45 us`` — three significant figures or more."""
    if x == 0:
        return "0 s"
    if abs(x) >= 1:
        return f"{x:,.3f} s"
    if abs(x) >= 1e-3:
        return f"{x * 1e3:.3g} ms"
    return f"{x * 1e6:.3g} us"


def axis_seconds(x: float) -> str:
    """A round axis tick: ``2 s``, ``500 ms``."""
    return f"{x:g} s" if x >= 1 or x == 0 else f"{x * 1e3:g} ms"


def gib(x: float) -> str:
    """``75.30 GiB``."""
    return f"{x:,.2f} GiB"


def percent(x: float, digits: int = 1) -> str:
    """A fraction as ``59.5 %``."""
    return f"{100 * x:.{digits}f} %"


def signed_percent(x: float) -> str:
    """A relative change as ``+3.8 %`` / ``-1.2 %``."""
    return f"{100 * x:+.1f} %"


def signed_seconds(x: float) -> str:
    """A time difference with its sign."""
    return ("+" if x >= 0 else "-") + seconds(abs(x))


def signed_gib(x: float) -> str:
    """A memory difference with its sign."""
    return f"{x:+,.2f} GiB"


def count(n: float) -> str:
    """``83,856``."""
    return f"{n:,.0f}"


def ranges(values: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5``."""
    if not values:
        return "-"
    out, start, prev = [], values[0], values[0]
    for v in values[1:] + [None]:  # type: ignore[list-item]
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(f"{start}-{prev}" if prev > start else f"{start}")
        if v is not None:
            start = prev = v
    return ", ".join(out)
