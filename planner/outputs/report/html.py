"""The report as one self-contained HTML file: inline CSS, inline SVG charts, no scripts, no network
loads (it works offline and from ``file://``)."""

from __future__ import annotations

from html import escape

import planner.outputs.report.charts as charts
import planner.outputs.report.facts as facts
import planner.outputs.report.fmt as fmt
from planner.outputs.report.data import ReportData
from planner.outputs.report.facts import Row
from planner.outputs.report.text import FORMULAS, GLOSSARY, TIMELINE_NOTE

CSS = """
:root{--ink:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#f6f8fa;--accent:#0969da}
*{box-sizing:border-box}
body{margin:0;color:var(--ink);background:#fff;font:14px/1.5 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif}
main{max-width:1040px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:34px 0 10px;padding-bottom:6px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:20px 0 8px}
p.lead{color:var(--muted);margin:0 0 18px}
.cards{display:grid;grid-template-columns:repeat(5,1fr);gap:10px;margin:16px 0}
.card{background:var(--bg);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.card b{display:block;font-size:20px}.card span{color:var(--muted);font-size:12px}
.verdict{border-left:4px solid var(--accent);background:#ddf4ff;padding:10px 14px;border-radius:4px;margin:12px 0}
table{border-collapse:collapse;width:100%;margin:8px 0 14px;font-size:13px}
th,td{border:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:var(--bg);font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.diff td{background:#fff8c5}
pre{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:10px 12px;overflow-x:auto;font-size:12px;line-height:1.45}
nav{font-size:13px;color:var(--muted);margin:8px 0 0}nav a{color:var(--accent);text-decoration:none;margin-right:12px}
figure{margin:10px 0 18px}figcaption{color:var(--muted);font-size:12px;margin-top:4px}
svg{max-width:100%;height:auto}
.muted{color:var(--muted)}
"""

SECTIONS = (("summary", "Summary"), ("why", "Why this plan"), ("layout", "Mesh and ranks"), ("stages", "Stages"),
            ("time", "Time"), ("memory", "Memory"), ("schedule", "Schedule"), ("sensitivity", "Sensitivity"),
            ("search", "Search"), ("assumptions", "Assumptions"), ("glossary", "Glossary"), ("launch", "Launchers"))


def table(headers: list[str], rows: list[list[str]], numeric: tuple[int, ...] = (), highlight=None) -> str:
    """An HTML table; columns in ``numeric`` align right; ``highlight(row)`` marks rows."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for r in rows:
        cls = ' class="diff"' if highlight and highlight(r) else ""
        cells = "".join(f'<td class="num">{escape(str(c))}</td>' if i in numeric else f"<td>{escape(str(c))}</td>" for i, c in enumerate(r))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def row_table(rows: list[Row], third: str = "how") -> str:
    return table(["", "value", third], [[r.label, r.value, r.how] for r in rows])


def section(key: str, title: str, *body: str) -> str:
    return f'<section id="{key}"><h2>{escape(title)}</h2>' + "".join(body) + "</section>"


def figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def p(text: str, cls: str = "") -> str:
    return f'<p class="{cls}">{escape(text)}</p>' if cls else f"<p>{escape(text)}</p>"


def render(data: ReportData) -> str:
    """The whole report as one HTML document."""
    plan = data.plan
    nav = "<nav>" + "".join(f'<a href="#{k}">{escape(t)}</a>' for k, t in SECTIONS) + "</nav>"
    parts = [f"<h1>{escape(data.title)}</h1>", p(facts.headline(plan), "lead"), nav, _cards(data),
             section("summary", "Summary", row_table(facts.summary_rows(plan)),
                     f'<div class="verdict"><b>Binding constraint.</b> {escape(facts.binding_constraint(plan))}</div>'),
             _why(data), _layout(data), _stages(data), _time(data), _memory(data), _schedule(data), _sensitivity(data),
             section("search", "Search", row_table(facts.search_rows(plan)), "<h3>Inputs</h3>", row_table(facts.input_rows(plan), "source")),
             section("assumptions", "Assumptions", row_table(facts.assumption_rows(plan), "source")),
             section("glossary", "Glossary and formulas", table(["term", "meaning"], [list(g) for g in GLOSSARY]),
                     table(["quantity", "formula", "source"], [list(f) for f in FORMULAS])),
             _launch(data)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{escape(data.title)}</title><style>{CSS}</style></head><body><main>" + "\n".join(parts) + "</main></body></html>\n")


def _cards(data: ReportData) -> str:
    e = data.plan.estimate
    items = [(fmt.seconds(e.step_time_s), "step time"), (fmt.count(e.tokens_per_s), "tokens/s"), (fmt.percent(e.mfu), "MFU"),
             (f"{e.peak_memory_gib:.1f} / {e.memory_capacity_gib:.1f} GiB", "peak memory per GPU"),
             (fmt.gib(e.memory_capacity_gib - e.peak_memory_gib), "memory margin")]
    return '<div class="cards">' + "".join(f'<div class="card"><b>{escape(v)}</b><span>{escape(k)}</span></div>' for v, k in items) + "</div>"


def _alt_time(data: ReportData) -> dict[str, float] | None:
    w = data.whatif
    return w.alternatives[0].time_s if w.available and w.alternatives else None


def _changed(row: list[str]) -> bool:
    """A side-by-side row whose difference is not nil (``differs``, or a change with a nonzero digit)."""
    diff = row[3].split("(")[0]
    return diff == "differs" or any(ch in "123456789" for ch in diff)


def _why(data: ReportData) -> str:
    plan = data.plan
    rows = facts.runner_up_rows(plan, _alt_time(data))
    side = table(["", "chosen", "runner-up", "difference"], [list(r) for r in rows], highlight=_changed) if rows else ""
    return section("why", "Why this plan",
                   f'<div class="verdict">{escape(facts.why_runner_up_lost(plan, _alt_time(data)))}</div>',
                   "<h3>Chosen plan and runner-up side by side</h3>" if rows else "", side,
                   figure(charts.alternatives_chart(plan), "Each alternative's step time relative to the chosen plan, and its peak memory against capacity."),
                   "<h3>Alternatives</h3>",
                   table(["rank", "configuration", "step time", "vs chosen", "peak memory", "vs chosen", "fits", "why it lost"], facts.alternative_rows(plan), numeric=(2, 3, 4, 5)))


def _layout(data: ReportData) -> str:
    m = data.plan.mesh
    intro = (f"dp {m.dp} x tp {m.tp} x pp {m.pp} x cp {m.cp} = {m.dp * m.tp * m.pp * m.cp} GPUs on {m.nodes} node{'s' if m.nodes != 1 else ''} of {m.gpus_per_node}; ep {m.ep}; "
             f"rank order {m.rank_order} (fastest-varying first, so TP neighbours share a node).")
    return section("layout", "Mesh and rank layout", p(intro),
                   table(["dimension", "degree", "rank stride", "first group", "groups run", "link time per step"], facts.placement_rows(data.plan), numeric=(1, 2, 5)),
                   figure(charts.rank_grid(data.plan), "One cell per GPU: rank, then pipeline (p), data (d), context (c) and tensor (t) coordinates."))


def _stages(data: ReportData) -> str:
    headers = ["stage", "pp rank", "chunk", "layers", "content", "recompute", "time / micro-batch (rank)", "memory (rank)", "ranks", "nodes"]
    return section("stages", "Pipeline stages", table(headers, facts.stage_rows(data.plan), numeric=(0, 1, 2, 3, 6, 7, 8, 9)), p(facts.sharding_line(data.plan)))


def _time(data: ReportData) -> str:
    e = data.plan.estimate
    total_link = sum(e.link_time_s.model_dump().values())
    note = (f"Links are busy {fmt.seconds(total_link)} per step in total; {fmt.seconds(e.time_breakdown_s.exposed_comm)} of communication is exposed "
            "(not hidden behind compute) and adds to the step.")
    return section("time", "Where the time goes", figure(charts.time_chart(data.plan), note),
                   table(["component", "time", "share of step"], facts.time_rows(data.plan), numeric=(1, 2)),
                   table(["link", "link time per step", "share of step"], facts.link_rows(data.plan), numeric=(1, 2)))


def _memory(data: ReportData) -> str:
    w = data.whatif
    caption = "Stacked by part for every pipeline rank; the dashed line is the capacity." if w.available else f"Totals only ({w.reason})."
    return section("memory", "Memory", figure(charts.memory_chart(data.plan, w.rank_memory_gib if w.available else None), caption),
                   "<h3>Most loaded GPU</h3>", table(["part", "memory", "share of capacity"], facts.memory_rows(data.plan), numeric=(1, 2)))


def _schedule(data: ReportData) -> str:
    e = data.plan.estimate
    bubble = e.time_breakdown_s.pipeline_bubble
    return section("schedule", "Pipeline schedule", figure(charts.timeline_chart(data.plan), TIMELINE_NOTE),
                   p(f"Bubble over the whole step: {fmt.seconds(bubble)} ({fmt.percent(bubble / e.step_time_s)})."))


def _sensitivity(data: ReportData) -> str:
    w = data.whatif
    if not w.available:
        return section("sensitivity", "Sensitivity", p(f"Not available: {w.reason}."))
    base = w.scenarios[0].step_time_s or 1.0
    rows = [[sc.label, sc.change, fmt.seconds(sc.step_time_s) if sc.step_time_s is not None else "-",
             fmt.signed_percent(sc.step_time_s / base - 1) if sc.step_time_s is not None else "-",
             fmt.gib(sc.peak_memory_gib) if sc.peak_memory_gib is not None else "-",
             "-" if sc.fits is None else ("yes" if sc.fits else "no"), sc.shape] for sc in w.scenarios]
    return section("sensitivity", "Sensitivity", table(["scenario", "change", "step time", "vs planned", "peak memory", "fits", "configuration"], rows, numeric=(2, 3, 4)))


def _launch(data: ReportData) -> str:
    body = []
    for f in data.fragments:
        body.append(f"<h3>{escape(f.target)}</h3>")
        if f.text is None:
            body.append(p(f"Not expressible: {f.refused}", "muted"))
            continue
        body.append(f"<pre>{escape(f.text)}</pre>")
        if f.code:
            body.append(f"<pre>{escape(f.code)}</pre>")
    return section("launch", "Launcher fragments", *body)
