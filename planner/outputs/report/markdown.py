"""The report as GitHub-flavoured Markdown: tables and fenced blocks that render in a code review."""

from __future__ import annotations

import dataclasses
import re

import planner.outputs.report.facts as facts
import planner.outputs.report.fmt as fmt
from planner.outputs.report.data import ReportData
from planner.outputs.report.facts import Row
from planner.outputs.report.layout import coordinates, node_ranks, pp_ranks_of_node
from planner.outputs.report.text import FORMULAS, GLOSSARY
from planner.outputs.report.timeline import shown_microbatches, simulate
from planner.plans.schema import Plan

MAX_NODES = 8
"""Nodes drawn in the rank map; the rest repeat the pattern."""
TIMELINE_WIDTH = 96
BAR_WIDTH = 24


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A pipe table (``|`` in cells escaped)."""
    def cell(x: str) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(cell, headers)) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(map(cell, r)) + " |" for r in rows]
    return "\n".join(lines)


def row_table(rows: list[Row], headers: tuple[str, str, str] = ("", "value", "how")) -> str:
    return table(list(headers), [[r.label, r.value, r.how] for r in rows])


def bar(fraction: float) -> str:
    """A text bar of ``BAR_WIDTH`` cells."""
    n = max(0, min(BAR_WIDTH, round(fraction * BAR_WIDTH)))
    return "`" + "#" * n + "." * (BAR_WIDTH - n) + "`"


def render(data: ReportData) -> str:
    """The whole report; the names the plan carries are Markdown-escaped (:func:`escaped_names`)."""
    data = dataclasses.replace(data, plan=escaped_names(data.plan))
    p = data.plan
    out = [f"# {data.title}", "", f"> **{facts.headline(p)}**", ""]
    out += ["## Summary", "", row_table(facts.summary_rows(p)), "", f"**Binding constraint.** {facts.binding_constraint(p)}", ""]
    out += _why(data) + _layout(data) + _stages(data) + _time(data) + _memory(data) + _timeline(data) + _sensitivity(data)
    out += ["## Search", "", row_table(facts.search_rows(p)), "", "## Inputs", "", row_table(facts.input_rows(p), ("", "value", "source")), ""]
    out += ["## Assumptions", "", row_table(facts.assumption_rows(p), ("", "value", "source")), ""]
    out += ["## Glossary", "", table(["term", "meaning"], [list(g) for g in GLOSSARY]), ""]
    out += ["## Formulas", "", table(["quantity", "formula", "source"], [list(f) for f in FORMULAS]), ""]
    out += _fragments(data)
    return "\n".join(out).rstrip() + "\n"


def _alt_time(data: ReportData) -> dict[str, float] | None:
    w = data.whatif
    return w.alternatives[0].time_s if w.available and w.alternatives else None


def _why(data: ReportData) -> list[str]:
    p = data.plan
    out = ["## Why this plan", "", facts.why_runner_up_lost(p, _alt_time(data)), ""]
    rows = facts.runner_up_rows(p, _alt_time(data))
    if rows:
        out += ["### Chosen plan and runner-up side by side", "", table(["", "chosen", "runner-up", "difference"], [list(r) for r in rows]), ""]
    out += ["### Alternatives", "", table(["rank", "configuration", "step time", "vs chosen", "peak memory", "vs chosen", "fits", "why it lost"], facts.alternative_rows(p)), ""]
    return out


def _layout(data: ReportData) -> list[str]:
    m = data.plan.mesh
    out = ["## Mesh and rank layout", "",
           f"dp {m.dp} x tp {m.tp} x pp {m.pp} x cp {m.cp} = {m.dp * m.tp * m.pp * m.cp} GPUs on {m.nodes} node{'s' if m.nodes != 1 else ''} of {m.gpus_per_node}; "
           f"ep {m.ep}; rank order `{m.rank_order}` (fastest-varying first).", "",
           table(["dimension", "degree", "rank stride", "first group", "groups run", "link time per step"], facts.placement_rows(data.plan)), "",
           "Each cell below is one GPU: `p` pipeline rank, `d` data-parallel rank, `c` context-parallel rank, `t` tensor-parallel rank.", ""]
    shown = min(m.nodes, MAX_NODES)
    headers = ["node", "pp ranks"] + [f"gpu {i}" for i in range(m.gpus_per_node)]
    rows = []
    for node in range(shown):
        cells = []
        for r in node_ranks(m, node):
            c = coordinates(r, m)
            cells.append(f"{r}: p{c['pp']} d{c['dp']} c{c['cp']} t{c['tp']}")
        rows.append([str(node), ",".join(map(str, pp_ranks_of_node(m, node)))] + cells + [""] * (m.gpus_per_node - len(cells)))
    out.append(table(headers, rows))
    if m.nodes > shown:
        out += ["", f"Nodes {shown}-{m.nodes - 1} continue the same pattern."]
    return out + [""]


def _stages(data: ReportData) -> list[str]:
    p = data.plan
    headers = ["stage", "pp rank", "chunk", "layers", "content", "recompute", "time / micro-batch (rank)", "memory (rank)", "ranks", "nodes"]
    return ["## Pipeline stages", "", table(headers, facts.stage_rows(p)), "", facts.sharding_line(p), ""]


def _time(data: ReportData) -> list[str]:
    p = data.plan
    e = p.estimate
    parts = e.time_breakdown_s.model_dump()
    rows = [r + [bar(parts[key] / e.step_time_s)] for r, (key, _) in zip(facts.time_rows(p), facts.TIME_PARTS)]
    exposed = e.time_breakdown_s.exposed_comm
    links = [r + [bar(v / e.step_time_s)] for r, v in zip(facts.link_rows(p), e.link_time_s.model_dump().values())]
    return ["## Where the time goes", "", table(["component", "time", "share of step", ""], rows), "",
            f"Communication keeps links busy longer than it costs: {fmt.seconds(sum(e.link_time_s.model_dump().values()))} of link time in total, "
            f"of which {fmt.seconds(exposed)} is exposed (not hidden behind compute).", "",
            table(["link", "link time per step", "share of step", ""], links), ""]


def _memory(data: ReportData) -> list[str]:
    p = data.plan
    out = ["## Memory", "", f"Most loaded GPU (capacity {fmt.gib(p.estimate.memory_capacity_gib)}):", "", table(["part", "memory", "share of capacity"], facts.memory_rows(p)), ""]
    w = data.whatif
    if w.available:
        cap = p.estimate.memory_capacity_gib
        rows = [[str(i)] + [f"{v:.2f}" for v in parts.values()] + [f"{sum(parts.values()):.2f}", bar(sum(parts.values()) / cap)] for i, parts in enumerate(w.rank_memory_gib)]
        out += ["Per pipeline rank (GiB):", "", table(["pp rank", "params", "grads", "optimizer", "activations", "buffers", "total", "of capacity"], rows), ""]
    else:
        out += [f"Per-rank breakdown not available: {w.reason}.", ""]
    return out


def _timeline(data: ReportData) -> list[str]:
    p = data.plan
    s = p.schedule
    times = [r.time_per_microbatch_s for r in p.estimate.pipeline_ranks]
    shown = shown_microbatches(s.name, p.mesh.pp, s.num_microbatches)
    ops = simulate(s.name, times, s.virtual_stages, shown)
    end = max(o.end for o in ops)
    lines = []
    for r in range(p.mesh.pp):
        row = ["."] * TIMELINE_WIDTH
        for o in (o for o in ops if o.rank == r):
            a, b = int(o.start / end * TIMELINE_WIDTH), max(int(o.start / end * TIMELINE_WIDTH) + 1, int(o.end / end * TIMELINE_WIDTH))
            for i in range(a, min(b, TIMELINE_WIDTH)):
                row[i] = "f" if o.kind == "F" else "B"
        lines.append(f"rank {r:>3} |" + "".join(row) + "|")
    bubble = p.estimate.time_breakdown_s.pipeline_bubble
    return ["## Pipeline schedule", "",
            f"{s.name}, {s.virtual_stages} chunk(s) per rank, {s.num_microbatches} micro-batches of {s.micro_batch}; "
            f"the first {shown} are drawn (`f` forward, `B` backward, `.` idle). Bubble over the whole step: {fmt.seconds(bubble)} "
            f"({fmt.percent(bubble / p.estimate.step_time_s)}).", "", "```text", *lines, "```", ""]


def _sensitivity(data: ReportData) -> list[str]:
    w = data.whatif
    if not w.available:
        return ["## Sensitivity", "", f"Not available: {w.reason}.", ""]
    base = w.scenarios[0].step_time_s or 1.0
    rows = []
    for sc in w.scenarios:
        t = fmt.seconds(sc.step_time_s) if sc.step_time_s is not None else "-"
        d = fmt.signed_percent(sc.step_time_s / base - 1) if sc.step_time_s is not None else "-"
        mem = fmt.gib(sc.peak_memory_gib) if sc.peak_memory_gib is not None else "-"
        fits = "-" if sc.fits is None else ("yes" if sc.fits else "no")
        rows.append([sc.label, sc.change, t, d, mem, fits, sc.shape])
    note = ""
    recorded = data.plan.estimate.step_time_s
    if w.baseline_step_s is not None and abs(w.baseline_step_s / recorded - 1) > 1e-9:
        note = f"The cost model now predicts {fmt.seconds(w.baseline_step_s)} for this plan (recorded {fmt.seconds(recorded)}): it changed since planning."
    return ["## Sensitivity", "", table(["scenario", "change", "step time", "vs planned", "peak memory", "fits", "configuration"], rows), "", note, ""]


def _fragments(data: ReportData) -> list[str]:
    out = ["## Launcher fragments", ""]
    for f in data.fragments:
        out += [f"### {f.target}", ""]
        if f.text is None:
            out += [f"Not expressible: {f.refused}", ""]
            continue
        out += fenced(f.language, f.text)
        if f.code:
            out += fenced("python", f.code)
    return out


def fenced(language: str, text: str) -> list[str]:
    """A fenced code block whose fence is longer than any run of backticks in ``text`` (CommonMark
    0.31 section 4.5: a shorter run cannot close it), so text from a plan cannot end the block."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{language}", text.rstrip(), fence, ""]


_SPECIAL = re.compile(r"([\\`*_\[\]#!~<>&])")


def md_escape(text: str) -> str:
    """``text`` as literal Markdown: the punctuation that opens emphasis, code, links, images, HTML,
    entities or headings is backslash-escaped (CommonMark 0.31 section 2.4), so a name cannot start
    any of them; ``|`` is left to :func:`table`, which escapes it in cells."""
    return _SPECIAL.sub(r"\\\1", text)


def escaped_names(plan: Plan) -> Plan:
    """``plan`` with the free text the report prints (model and cluster names, model argument and
    sources, GPU name) Markdown-escaped."""
    m, c = plan.model, plan.cluster
    model = m.model_copy(update={"name": md_escape(m.name), "arg": md_escape(m.arg), "source": md_escape(m.source)})
    gpu = c.gpu.model_copy(update={"name": md_escape(c.gpu.name)})
    cluster = c.model_copy(update={"name": md_escape(c.name), "source": md_escape(c.source), "gpu": gpu})
    return plan.model_copy(update={"model": model, "cluster": cluster})
