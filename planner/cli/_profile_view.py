"""What ``meshplan profile`` prints: measured vs the preset's assumption, and a small chart of
all-reduce bus bandwidth by buffer size (measured, the written cluster's model, the preset's model)."""

from __future__ import annotations

from typing import Any

from planner.cli._cluster_out import fmt

_BAR = 28
"""Width of the longest bar, characters."""


def print_profile(result: Any, path: str) -> None:
    """Print the comparison table and the chart for a ``ProfileResult`` written to ``path``."""
    from rich.console import Console

    console = Console()
    console.print(_table(result))
    chart = _chart(result)
    if chart is not None:
        console.print(chart)
    console.print(f"wrote {path} (cluster '{result.entry['name']}'; use it as --cluster {path})")


def _table(result: Any) -> Any:
    from rich import box
    from rich.table import Table

    preset = result.preset_name or "first principles"
    table = Table(title=f"measured vs {preset}", title_justify="left", box=box.SIMPLE_HEAD)
    for header, justify in (("quantity", "left"), ("unit", "left"), ("measured", "right"), (preset, "right"), ("ratio", "right")):
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    for row in result.rows:
        ratio = row.measured / row.preset if row.measured is not None and row.preset else None
        table.add_row(row.quantity, row.unit, fmt(row.measured), fmt(row.preset), "-" if ratio is None else f"{ratio:.2f}x")
    return table


def _chart(result: Any) -> Any:
    """Bars of measured all-reduce busbw per size (the widest scope measured), with model values."""
    from rich import box
    from rich.table import Table

    from costmodel import comm

    points = [p for p in result.entry["measurements"]["collectives"] if p["op"] == "all_reduce"]
    if not points:
        return None
    scope = "inter_node" if any(p["scope"] == "inter_node" for p in points) else "intra_node"
    points = [p for p in points if p["scope"] == scope]
    top = max(p["busbw_gbps"] for p in points)
    table = Table(title=f"all-reduce busbw, {scope.replace('_', '-')}, {points[0]['ranks']} ranks (GB/s)", title_justify="left", box=box.SIMPLE_HEAD)
    for header in ("size", "measured", "", "model", "preset model"):
        table.add_column(header, justify="left" if header == "" else "right")
    for p in points:
        bar = "█" * max(1, round(_BAR * p["busbw_gbps"] / top))
        factor = p["busbw_gbps"] / p["algbw_gbps"]
        model = p["bytes"] / p["model_s"] / 1e9 * factor if p.get("model_s") else None
        preset = _preset_busbw(result, comm, scope, p, factor)
        table.add_row(_size(p["bytes"]), fmt(p["busbw_gbps"]), bar, fmt(model), fmt(preset))
    return table


def _preset_busbw(result: Any, comm: Any, scope: str, point: dict[str, Any], factor: float) -> float | None:
    """What the preset's cluster predicts for the same all-reduce, as busbw."""
    preset = getattr(result, "preset_spec", None)
    if preset is None:
        return None
    across = scope == "inter_node"
    group = comm.Group(size=point["ranks"], per_node=1 if across else point["ranks"])
    return point["bytes"] / comm.all_reduce(preset, group, point["bytes"]) / 1e9 * factor


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes} B"
