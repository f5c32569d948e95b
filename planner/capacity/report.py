"""The sweep report: one self-contained HTML page (inline CSS and SVG, no scripts, no network loads)
with throughput, MFU, scaling efficiency, memory headroom, time to train and cost against the GPU
count per cluster, the deadline answer, every point in a table linked to its own plan report, and the
formulas and power figures with their sources. Built from the plan report's HTML and SVG helpers."""

from __future__ import annotations

from html import escape
from pathlib import Path

from planner.outputs.report import fmt
from planner.outputs.report.html import CSS, figure, p, section, table
from planner.capacity.assemble import series_key
from planner.capacity.charts import Series, line_chart
from planner.capacity.result import SweepPoint, SweepResult


def plan_files(result: SweepResult, report: Path) -> dict[int, tuple[str, str]]:
    """Per point with a plan, its plan JSON and plan report paths relative to the sweep report's folder
    (a ``<report stem>_plans`` folder beside it)."""
    folder = f"{report.stem}_plans"
    out = {}
    for pt in result.points:
        if pt.status == "ok":
            stem = f"{pt.index:03d}-{_safe(pt.cluster)}-{pt.gpus}gpu-b{pt.global_batch}-s{pt.seq_len}"
            out[pt.index] = (f"{folder}/{stem}.json", f"{folder}/{stem}.html")
    return out


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in Path(name).stem)[:40]


def _pct(v: float) -> str:
    """An axis or hover percentage with three significant figures (``52.3 %``, ``1.25 %``)."""
    return f"{100 * v:.3g} %"


def _series(result: SweepResult, value) -> list[Series]:
    chosen = result.request.batch_chosen_per_point
    groups: dict[tuple, list[SweepPoint]] = {}
    for pt in result.points:
        if pt.status == "ok" and value(pt) is not None:
            groups.setdefault(series_key(pt, chosen), []).append(pt)
    out = []
    for key, pts in groups.items():
        batch = "batch chosen" if chosen else f"batch {key[2]}"
        label = f"{key[0]}, seq {key[1]}, {batch}"
        out.append(Series(label, tuple(sorted((pt.gpus, float(value(pt))) for pt in pts))))
    return out


def _charts(result: SweepResult) -> str:
    parts = [
        figure(line_chart("Throughput", _series(result, lambda x: x.tokens_per_s), "tokens/s", fmt.count, log_y=True),
               "Tokens per second of the whole job with each point's best plan (log scales)."),
        figure(line_chart("Model FLOPs utilisation", _series(result, lambda x: x.mfu), "MFU", _pct),
               "Model FLOPs per second over the GPUs' dense peak."),
        figure(line_chart("Scaling efficiency", _series(result, lambda x: x.scaling_efficiency), "efficiency", _pct),
               "Tokens/s per GPU relative to the smallest GPU count of the same cluster, sequence and batch."),
        figure(line_chart("Memory headroom", _series(result, lambda x: x.memory_headroom_gib), "GiB free", lambda v: f"{v:g}"),
               "Capacity minus the most loaded GPU's predicted peak."),
    ]
    if result.request.tokens is not None:
        parts.append(figure(line_chart("Time to train", _series(result, lambda x: x.time_to_train_days), "days", lambda v: f"{v:g}", log_y=True),
                            f"Days to train on the token budget ({fmt.count(result.request.tokens)} tokens)."))
        if result.request.price_per_gpu_hour:
            parts.append(figure(line_chart("Cost", _series(result, lambda x: x.cost_usd), "US$", lambda v: f"${v:,.0f}", log_y=True),
                                "GPU-hours times the price per GPU-hour."))
    return section("charts", "Scaling", *parts)


def _cell(value, kind: str) -> str:
    if value is None:
        return "-"
    return {"s": fmt.seconds, "pct": fmt.percent, "count": fmt.count, "gib": lambda v: f"{v:.1f}", "days": lambda v: f"{v:,.1f}",
            "usd": lambda v: f"${v:,.0f}", "kwh": lambda v: f"{v / 1000:,.1f}", "eff": lambda v: fmt.percent(v, 0)}[kind](value)


def _points(result: SweepResult, links: dict[int, tuple[str, str]]) -> str:
    headers = ["#", "cluster", "GPUs", "seq", "batch", "step", "tokens/s", "MFU", "scaling", "headroom GiB", "days", "cost", "MWh", "plan"]
    rows = []
    for pt in result.points:
        plan = pt.plan_summary or pt.reason or ""
        link = links.get(pt.index)
        cell = f'<a href="{escape(link[1])}">{escape(plan)}</a>' if link else escape(plan)
        values = [pt.index, pt.cluster, f"{pt.gpus:,}", pt.seq_len, pt.global_batch if pt.global_batch else "-",
                  _cell(pt.step_time_s, "s"), _cell(pt.tokens_per_s, "count"), _cell(pt.mfu, "pct"), _cell(pt.scaling_efficiency, "eff"),
                  _cell(pt.memory_headroom_gib, "gib"), _cell(pt.time_to_train_days, "days"), _cell(pt.cost_usd, "usd"), _cell(pt.energy_kwh, "kwh")]
        cls = ' class="diff"' if pt.meets_deadline else ""
        tds = "".join(f'<td class="num">{escape(str(v))}</td>' if i not in (1,) else f"<td>{escape(str(v))}</td>" for i, v in enumerate(values))
        rows.append(f"<tr{cls}>{tds}<td>{cell}</td></tr>")
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    note = p("Each plan links to its own plan report. Highlighted rows meet the deadline." if result.deadline else "Each plan links to its own plan report.", "muted")
    return section("points", "Every point", note, f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _deadline(result: SweepResult) -> str:
    if result.deadline is None:
        return ""
    days = (result.request.deadline_s or 0) / 86400
    rows = [[a.cluster, f"{a.gpus:,}" if a.gpus else "none in the grid", _cell(a.time_to_train_days, "days"), _cell(a.cost_usd, "usd")]
            for a in result.deadline]
    miss = result.deadline_miss()
    return section("deadline", f"Deadline: {days:g} days", table(["cluster", "smallest GPU count in time", "days", "cost"], rows, numeric=(1, 2, 3)),
                   p(miss) if miss else "")


def _assumptions(result: SweepResult) -> str:
    power = table(["cluster", "GPU TDP", "source", "node overhead", "source"],
                  [[x.cluster, f"{x.gpu_tdp_w:g} W" if x.gpu_tdp_w else "-", x.gpu_tdp_source,
                    f"{x.node_overhead_w:g} W" if x.node_overhead_w else "-", x.node_overhead_source] for x in result.power])
    return section("assumptions", "Formulas and power", table(["formula"], [[f] for f in result.formulas]), power)


def render(result: SweepResult, links: dict[int, tuple[str, str]] | None = None) -> str:
    """The whole page."""
    r = result.request
    title = f"Capacity sweep: {r.model}"
    ok = sum(1 for x in result.points if x.status == "ok")
    lead = (f"{len(result.points)} points ({ok} with a plan): clusters {', '.join(r.clusters)}; GPUs {', '.join(f'{g:,}' for g in r.gpus)}; "
            f"sequence {', '.join(map(str, r.seq_len))}; batch {'chosen per point from ' if r.batch_chosen_per_point else ''}"
            f"{', '.join(map(str, r.global_batch))}; target {r.target}.")
    body = [f"<h1>{escape(title)}</h1>", p(lead, "lead"), _deadline(result), _charts(result), _points(result, links or {}), _assumptions(result)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>" + "\n".join(body) + "</main></body></html>\n")
