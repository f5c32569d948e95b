"""The HTML report's charts, drawn as inline SVG from the plan (and its re-estimates)."""

from __future__ import annotations

import planner.outputs.report.fmt as fmt
from planner.outputs.report.facts import MEMORY_PARTS, TIME_PARTS
from planner.outputs.report.layout import coordinates, node_ranks
from planner.outputs.report.svg import PALETTE, Svg, nice_step, shade, text_colour
from planner.outputs.report.timeline import shown_microbatches, simulate
from planner.plans.schema import Plan

WIDTH = 980
TIME_COLOURS = dict(zip((k for k, _ in TIME_PARTS), ("#4c78a8", "#72b7b2", "#e45756", "#eeca3b", "#b279a2")))
MEMORY_COLOURS = dict(zip((k for k, _ in MEMORY_PARTS), ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#9d755d")))
MAX_GRID_NODES = 16


def time_chart(plan: Plan) -> str:
    """The step as one stacked bar (compute, recompute, exposed communication, bubble, optimizer),
    then each dimension's link time against the exposed communication it left."""
    e = plan.estimate
    tb, links = e.time_breakdown_s.model_dump(), e.link_time_s.model_dump()
    rows = [(k.upper(), v, "#9ecae9") for k, v in links.items()] + [("exposed", tb["exposed_comm"], TIME_COLOURS["exposed_comm"])]
    svg = Svg(WIDTH, 0, "Step time breakdown and link time per dimension")
    left, span = 90, WIDTH - 110
    svg.text(0, 16, f"Step time {fmt.seconds(e.step_time_s)}", bold=True)
    x = left
    for key, label in TIME_PARTS:
        w = span * tb[key] / e.step_time_s
        tip = f"{label}: {fmt.seconds(tb[key])} ({fmt.percent(tb[key] / e.step_time_s)})"
        svg.rect(x, 28, w, 34, TIME_COLOURS[key], tip)
        if w > 70:
            svg.text(x + w / 2, 50, f"{label} {fmt.percent(tb[key] / e.step_time_s, 0)}", size=11, anchor="middle", fill=text_colour(TIME_COLOURS[key]))
        x += w
    svg.text(0, 50, "step", size=12)
    y0 = svg.legend(left, 84, [(TIME_COLOURS[k], f"{label} {fmt.seconds(tb[k])}") for k, label in TIME_PARTS]) + 40
    top = max(v for _, v, _ in rows) or 1.0
    svg.text(0, y0, "Link time per step (busy links, hidden or not) and the exposed part of all communication", size=12, bold=True)
    for i, (label, value, colour) in enumerate(rows):
        y = y0 + 10 + 22 * i
        svg.text(0, y + 13, label, size=11)
        svg.rect(left, y, (span - 80) * value / top, 16, colour, f"{label}: {fmt.seconds(value)}")
        svg.text(left + (span - 80) * value / top + 6, y + 13, fmt.seconds(value), size=11)
    svg.height = y0 + 20 + 22 * len(rows)
    return svg.render()


def memory_chart(plan: Plan, rank_memory: list[dict[str, float]] | None) -> str:
    """Memory of every pipeline rank against capacity: stacked by part when re-estimated, totals
    (the plan's per-stage numbers) otherwise."""
    e, n = plan.estimate, plan.mesh.pp
    totals = [r.memory_gib for r in e.pipeline_ranks]
    cap = e.memory_capacity_gib
    top = max(cap, max(totals)) * 1.08
    base, left = 250, 60
    svg = Svg(WIDTH, base + 44, "Memory per pipeline rank against capacity")
    plot_w = WIDTH - left - 20
    slot = plot_w / n
    bw = min(70.0, slot * 0.7)
    scale = (base - 20) / top
    step = nice_step(top)
    tick = 0.0
    while tick <= top:
        y = base - tick * scale
        svg.line(left, y, WIDTH - 20, y, "#e5e5e5")
        svg.text(left - 6, y + 4, f"{tick:g}", size=10, anchor="end")
        tick += step
    svg.text(0, 12, "GiB", size=11)
    for i in range(n):
        x = left + slot * i + (slot - bw) / 2
        y = base
        parts = rank_memory[i] if rank_memory else {"total": totals[i]}
        for key, value in parts.items():
            h = value * scale
            colour = MEMORY_COLOURS.get(key, "#8c8c8c")
            svg.rect(x, y - h, bw, h, colour, f"pp rank {i} {key}: {fmt.gib(value)}")
            y -= h
        if slot >= 28 or i % max(1, round(28 / slot)) == 0:
            svg.text(x + bw / 2, base + 14, str(i), size=10, anchor="middle")
            svg.text(x + bw / 2, y - 4, f"{totals[i]:.1f}", size=10, anchor="middle")
    cy = base - cap * scale
    svg.line(left, cy, WIDTH - 20, cy, "#d62728", 1.5, "6 4")
    svg.text(WIDTH - 22, cy - 5, f"capacity {fmt.gib(cap)}", size=11, anchor="end", fill="#d62728")
    svg.text(left, base + 30, "pipeline rank", size=11)
    if rank_memory:
        svg.legend(left + 100, base + 30, [(MEMORY_COLOURS[k], label) for k, label in MEMORY_PARTS])
    else:
        svg.text(left + 100, base + 30, "totals only: the part split needs the model (see the memory table)", size=11)
    return svg.render()


def timeline_chart(plan: Plan) -> str:
    """The first micro-batches of the schedule on every pipeline rank (light forward, dark backward,
    one hue per model chunk; white gaps are the bubble)."""
    s = plan.schedule
    times = [r.time_per_microbatch_s for r in plan.estimate.pipeline_ranks]
    shown = shown_microbatches(s.name, plan.mesh.pp, s.num_microbatches)
    ops = simulate(s.name, times, s.virtual_stages, shown)
    end = max(o.end for o in ops)
    pp = plan.mesh.pp
    row = max(8.0, min(24.0, 480 / pp))
    left, span = 70, WIDTH - 90
    svg = Svg(WIDTH, 40 + row * pp + 40, f"{s.name} pipeline timeline, first {shown} micro-batches")
    svg.text(0, 14, f"{s.name}, {s.virtual_stages} chunk(s) per rank: first {shown} of {s.num_microbatches} micro-batches", bold=True)
    for r in range(pp):
        y = 26 + r * row
        svg.rect(left, y, span, row - 2, "#f4f4f4")
        if row >= 12 or r % 4 == 0:
            svg.text(left - 6, y + row * 0.7, f"rank {r}", size=min(11, row * 0.8), anchor="end")
    for o in ops:
        hue = PALETTE[o.chunk % len(PALETTE)]
        colour = shade(hue, 0.45) if o.kind == "F" else hue
        x, w = left + span * o.start / end, span * (o.end - o.start) / end
        y = 26 + o.rank * row
        svg.rect(x, y, w, row - 2, colour, f"rank {o.rank} {'forward' if o.kind == 'F' else 'backward'} micro-batch {o.microbatch} chunk {o.chunk}: {fmt.seconds(o.start)}-{fmt.seconds(o.end)}", stroke="#ffffff")
        if w >= 14 and row >= 12:
            svg.text(x + w / 2, y + row * 0.68, str(o.microbatch), size=min(10, row * 0.6), anchor="middle", fill=text_colour(colour))
    axis = 26 + pp * row + 4
    step, tick = nice_step(end), 0.0
    while tick <= end:
        x = left + span * tick / end
        svg.line(x, axis, x, axis + 4)
        svg.text(x, axis + 16, fmt.axis_seconds(round(tick, 9)), size=10, anchor="middle")
        tick += step
    return svg.render()


def rank_grid(plan: Plan) -> str:
    """Every GPU of the first nodes, coloured by pipeline rank, labelled with its rank and its
    data / context / tensor coordinates."""
    m = plan.mesh
    nodes = min(m.nodes, MAX_GRID_NODES)
    left, cell_h = 70, 38
    cell_w = (WIDTH - left - 10) / m.gpus_per_node
    svg = Svg(WIDTH, 20 + nodes * (cell_h + 4) + 24, "Rank layout: GPUs per node coloured by pipeline rank")
    for node in range(nodes):
        y = 10 + node * (cell_h + 4)
        svg.text(left - 8, y + cell_h * 0.6, f"node {node}", size=11, anchor="end")
        for j, r in enumerate(node_ranks(m, node)):
            c = coordinates(r, m)
            colour = PALETTE[c["pp"] % len(PALETTE)]
            x = left + j * cell_w
            svg.rect(x + 1, y, cell_w - 2, cell_h, colour, f"rank {r}: pp {c['pp']}, dp {c['dp']}, cp {c['cp']}, tp {c['tp']}")
            fill = text_colour(colour)
            svg.text(x + cell_w / 2, y + 15, f"rank {r}", size=10, anchor="middle", fill=fill, bold=True)
            svg.text(x + cell_w / 2, y + 30, f"p{c['pp']} d{c['dp']} c{c['cp']} t{c['tp']}", size=10, anchor="middle", fill=fill)
    note = f"nodes {nodes}-{m.nodes - 1} repeat the pattern" if m.nodes > nodes else "colour = pipeline rank"
    svg.text(left, 10 + nodes * (cell_h + 4) + 14, note, size=11)
    return svg.render()


def alternatives_chart(plan: Plan) -> str:
    """The chosen plan and each alternative: how much slower (left) and how full memory is (right)."""
    e = plan.estimate
    rows = [("chosen", e.step_time_s, e.peak_memory_gib, e.fits)] + [(f"#{a.rank}", a.step_time_s, a.peak_memory_gib, a.fits) for a in plan.alternatives]
    worst = max((t / e.step_time_s - 1 for _, t, _, _ in rows), default=0.0) or 0.01
    cap = e.memory_capacity_gib
    svg = Svg(WIDTH, 44 + 26 * len(rows), "Chosen plan against its alternatives")
    half = (WIDTH - 80) / 2
    svg.text(70, 14, "slower than the chosen plan", size=12, bold=True)
    svg.text(80 + half, 14, "peak memory of capacity", size=12, bold=True)
    for i, (label, t, mem, fits) in enumerate(rows):
        y = 26 + 26 * i
        svg.text(60, y + 13, label, size=11, anchor="end", bold=label == "chosen")
        slower = t / e.step_time_s - 1
        w = (half - 110) * slower / worst
        svg.rect(70, y, w, 18, "#e45756" if slower > 0 else "#54a24b", f"{label}: {fmt.seconds(t)}")
        svg.text(70 + w + 6, y + 13, f"{fmt.signed_percent(slower)} ({fmt.seconds(t)})", size=11)
        mw = (half - 70) * min(mem / cap, 1.0)
        svg.rect(80 + half, y, (half - 70), 18, "#f0f0f0")
        svg.rect(80 + half, y, mw, 18, "#4c78a8" if fits else "#d62728", f"{label}: {fmt.gib(mem)} of {fmt.gib(cap)}")
        svg.text(80 + half + (half - 70) + 4, y + 13, f"{fmt.percent(mem / cap, 0)}", size=11)
    return svg.render()
