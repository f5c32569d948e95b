"""What ``meshplan calibrate`` prints: the factors, the error summary, and every run."""

from __future__ import annotations

from typing import Any

from planner.cli._cluster_out import fmt


def print_calibration(result: Any, path: str) -> None:
    """Tables of a ``Calibration`` written to ``path``."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from planner.calibration import FACTORS, error_stats

    console = Console()
    factors = Table(title="fitted factors", title_justify="left", box=box.SIMPLE_HEAD)
    for header in ("factor", "before", "fitted", "meaning"):
        factors.add_column(header)
    for name, value in result.values.items():
        factors.add_row(name, fmt(result.start[name]), fmt(value), FACTORS[name].doc)
    for name, why in result.kept.items():
        factors.add_row(name, "-", "kept", why)
    console.print(factors)
    measured = [r.obs.step_time_s for r in result.runs]
    summary = Table(title="step-time error (predicted / measured - 1)", title_justify="left", box=box.SIMPLE_HEAD)
    for header in ("", "mean |error|", "max |error|", "runs"):
        summary.add_column(header, justify="right")
    for label, predicted in (("before", [r.before_s for r in result.runs]), ("after (in-sample)", [r.after_s for r in result.runs]),
                             ("leave-one-shape-out", [r.held_out_s for r in result.runs])):
        stats = error_stats(predicted, measured)
        summary.add_row(label, *(("-", "-", "0") if stats is None else (f"{stats[0]:.1%}", f"{stats[1]:.1%}", str(stats[2]))))
    console.print(summary)
    console.print(_runs_table(result))
    console.print(f"wrote {path} (use it as --cluster {path})")


def _runs_table(result: Any) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(title="runs", title_justify="left", box=box.SIMPLE_HEAD)
    for header in ("run", "configuration", "measured s", "before", "after", "held out", "memory GiB meas / pred"):
        table.add_column(header, justify="left" if header in ("run", "configuration") else "right")
    for r in result.runs:
        m = r.obs.step_time_s

        def cell(p: float | None) -> str:
            return "-" if p is None else f"{fmt(p)} ({p / m - 1:+.0%})"

        memory = f"{fmt(r.obs.peak_memory_gib)} / {fmt(r.predicted_memory_gib)}"
        table.add_row(_short(r.obs.label), _config(r.obs), fmt(m), cell(r.before_s), cell(r.after_s), cell(r.held_out_s), memory)
    return table


def _short(label: str) -> str:
    """A run's file name (and CSV line), without its directory."""
    return label.rsplit("/", 1)[-1]


def _config(obs: Any) -> str:
    """A compact configuration: degrees, micro-batch, batch and sequence."""
    c = obs.config
    parts = [f"{k}{getattr(c, k)}" for k in ("tp", "pp", "dp", "cp") if getattr(c, k) > 1 or k == "dp"]
    return " ".join([*parts, f"z{c.zero}", f"mb{c.micro_batch}", f"b{c.global_batch}", f"s{c.seq_len}"])
