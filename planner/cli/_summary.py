"""The readable form of an estimate: headline numbers, where the time goes, where the memory goes.

Reads the dictionary of ``EstimateResult.model_dump()`` (keys fixed by DESIGN.md) and prints rich
tables to stdout. Link time (how long each parallel dimension's collectives occupy the links) is
shown apart from exposed time (what compute does not hide), as calculon reports them.
"""

from __future__ import annotations

from typing import Any

_TIME_ROWS = (
    ("compute", "compute"),
    ("exposed_comm", "exposed communication"),
    ("pipeline_bubble", "pipeline bubble"),
    ("recompute", "recompute"),
    ("optimizer", "optimizer step"),
)
_MESH_KEYS = ("dp", "tp", "pp", "cp")
_SETTING_KEYS = ("ep", "vpp", "sp", "zero", "recompute", "micro_batch", "global_batch", "seq_len", "schedule")
_MEMORY_ROWS = (
    ("params", "parameters"),
    ("grads", "gradients"),
    ("optimizer_states", "optimizer states"),
    ("activations", "activations"),
    ("buffers", "buffers"),
)


def print_summary(result: dict[str, Any]) -> None:
    """Print the estimate ``result`` (an ``EstimateResult.model_dump()``) as tables on stdout."""
    from rich.console import Console

    console = Console()
    for renderable in summary_renderables(result):
        console.print(renderable)


def summary_renderables(result: dict[str, Any]) -> list[Any]:
    """The summary as rich renderables, in print order (separate from printing for tests)."""
    from rich.text import Text

    parts: list[Any] = []
    config = config_line(result.get("config") or {})
    if config:
        parts.append(Text(config, style="bold"))
    parts += [_headline(result), _time_table(result), _link_table(result), _memory_table(result)]
    assumptions = result.get("assumptions") or []
    if assumptions:
        parts.append(Text("assumptions:\n" + "\n".join(f"  - {line}" for line in assumptions)))
    return parts


def config_line(config: dict[str, Any]) -> str:
    """The mesh and batch settings of ``config`` on one line, e.g. ``dp 8 x tp 8 x pp 16 x cp 1, ...``.

    Byte widths and overlap switches are left to ``--json``; keys missing from ``config`` are skipped.
    """
    mesh = " x ".join(f"{key} {config[key]}" for key in _MESH_KEYS if key in config)
    settings = [f"{key.replace('_', '-')} {_scalar(config[key])}" for key in _SETTING_KEYS if key in config]
    return ", ".join(part for part in (mesh, *settings) if part)


def memory_verdict(result: dict[str, Any]) -> str:
    """``"fits"`` or ``"does not fit: over by X GiB"`` (peak + headroom against the GPU's memory)."""
    if result["fits"]:
        return "fits"
    headroom = result.get("memory_headroom_gib", 0.0)
    kept = f" with {headroom:.2f} GiB of headroom kept free" if headroom else ""
    return f"does not fit: over by {result['over_by_gib']:.2f} GiB{kept}"


def format_seconds(seconds: float) -> str:
    """Seconds with a unit that keeps three significant digits readable (s, ms or us)."""
    if seconds >= 1:
        return f"{seconds:.3g} s" if seconds < 100 else f"{seconds:.0f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us" if seconds > 0 else "0"


def _headline(result: dict[str, Any]) -> Any:
    table = _table("estimate", ("", "value"))
    peak, capacity = result["peak_memory_gib"], result["memory_capacity_gib"]
    table.add_row("step time", format_seconds(result["step_time_s"]))
    table.add_row("tokens/s", f"{result['tokens_per_s']:,.0f}")
    table.add_row("MFU", f"{100 * result['mfu']:.1f} %")
    table.add_row("model TFLOP/s per GPU", f"{result['model_tflops_per_gpu']:.1f}")
    table.add_row("peak memory per GPU", f"{peak:.2f} of {capacity:.2f} GiB, {memory_verdict(result)}")
    return table


def _time_table(result: dict[str, Any]) -> Any:
    step = result["step_time_s"]
    table = _table("time per step", ("part", "time", "share of step"))
    for key, label in _TIME_ROWS:
        seconds = result["time_breakdown_s"][key]
        table.add_row(label, format_seconds(seconds), _share(seconds, step))
    return table


def _link_table(result: dict[str, Any]) -> Any:
    links = result["link_time_s"]
    table = _table("communication: link time vs exposed time", ("traffic", "time"))
    for dim, seconds in links.items():
        table.add_row(f"{dim} link time", format_seconds(seconds))
    table.add_row("total link time", format_seconds(sum(links.values())))
    table.add_row("exposed (not hidden by compute)", format_seconds(result["time_breakdown_s"]["exposed_comm"]))
    return table


def _memory_table(result: dict[str, Any]) -> Any:
    peak = result["peak_memory_gib"]
    rank = result.get("memory_breakdown_rank", 0)
    table = _table(f"memory per GPU (largest stage: pipeline rank {rank})", ("part", "GiB", "share of peak"))
    from planner.estimation.result import memory_part_rows

    for label, gib, share in memory_part_rows(result["memory_breakdown_gib"], _MEMORY_ROWS):
        table.add_row(label, f"{gib:.2f}", _share(gib, peak) if share else "")
    table.add_row("peak", f"{peak:.2f}", "")
    headroom = result.get("memory_headroom_gib", 0.0)
    table.add_row("headroom (kept free)", f"{headroom:.2f}", "")
    table.add_row("capacity - headroom", f"{result['memory_capacity_gib']:.2f}", memory_verdict(result))
    return table


def _table(title: str, headers: tuple[str, ...]) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for index, header in enumerate(headers):
        table.add_column(header, justify="left" if index == 0 else "right")
    return table


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole > 0 else "-"


def _scalar(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
