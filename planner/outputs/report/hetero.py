"""The report of a heterogeneous plan (issue 22): which GPU group runs what.

A mixed or degraded cluster's plan gets its own short report: the summary (step, tokens/s, MFU,
memory, search status and gap), the cluster's groups (GPU type, GPUs, slow GPUs, down nodes), a
stage/replica map, one row per replica (replicas with the same shape and share are folded into one
row), each stage coloured by its GPU type in HTML, and the gain over the homogeneous alternatives
(``planner.plans.hetero.gain``). Pure text building: no I/O.
"""

from __future__ import annotations

from html import escape

from planner.plans.schema import Plan

PALETTE = ("#ddf4ff", "#fff1e5", "#dafbe1", "#fbefff", "#fff8c5", "#ffebe9")
"""Background of each GPU group's cells, group after group."""


def replica_rows(plan: Plan) -> list[tuple[int, list[int], int, float, list[tuple[int, str, float, int, int]]]]:
    """Folded replicas: (count, replica indices, micro-batches, gradient weight, stages) where a
    stage is (group, GPU type, speed, layers, tp); replicas in plan order, equal neighbours folded."""
    assert plan.hetero is not None
    rows: list = []
    for r in plan.hetero.replicas:
        stages = [(s.group, s.gpu_cluster, s.speed, len(s.layers), len(s.devices)) for s in r.stages]
        if rows and rows[-1][2] == r.micro_batches and rows[-1][4] == stages:
            rows[-1][0] += 1
            rows[-1][1].append(r.index)
        else:
            rows.append([1, [r.index], r.micro_batches, r.grad_weight, stages])
    return [tuple(row) for row in rows]  # type: ignore[misc]


def group_rows(plan: Plan) -> list[list[str]]:
    """One row per cluster group: index, GPU type, GPUs, slow GPUs, down nodes."""
    assert plan.hetero is not None
    cluster, out = plan.hetero.cluster, []
    for g, group in enumerate(cluster.groups):
        first = cluster.first_gpu(g)
        slow = [f"{first + i}={group.speed(i):g}" for i in range(group.gpus) if group.speed(i) < 1.0]
        down = [str(cluster.first_node(g) + n) for n in group.down_nodes]
        out.append([str(g), f"{group.cluster.name} ({group.cluster.gpu.name}, {group.cluster.gpu.hbm_gib:g} GiB)",
                    f"{first}..{first + group.gpus - 1}", ", ".join(slow) or "none", ", ".join(down) or "none"])
    return out


def _ranges(indices: list[int]) -> str:
    return f"{indices[0]}" if len(indices) == 1 else f"{indices[0]}..{indices[-1]}"


def replica_lines(plan: Plan) -> list[str]:
    """Lines for the terminal summary: each folded replica row."""
    out = [f"replicas ({plan.hetero.gpus_used if plan.hetero else 0} GPUs used):"]
    for count, idx, mbs, weight, stages in replica_rows(plan):
        shape = " -> ".join(f"{t}@{sp:g} tp{tp} {n} layers" for _, t, sp, n, tp in stages)
        out.append(f"  {count} x replica {_ranges(idx)}: {mbs} micro-batches (grad weight {weight:.3f}): {shape}")
    return out


def _summary(plan: Plan) -> list[list[str]]:
    est, search = plan.estimate, plan.search
    return [["step", f"{est.step_time_s:.4g} s"], ["tokens/s", f"{est.tokens_per_s:,.0f}"], ["MFU", f"{est.mfu:.1%}"],
            ["fullest GPU", f"{est.peak_memory_gib:.1f} of {est.memory_capacity_gib:.1f} GiB"],
            ["mesh", f"tp {plan.mesh.tp} x pp {plan.mesh.pp} x {plan.mesh.dp} replicas, micro-batch {plan.schedule.micro_batch}"],
            ["search", f"{search.status}" + (f", gap {search.optimality_gap:.2%}" if search.optimality_gap else "")
             + f", {search.candidates_evaluated:,} mixes priced, {search.candidates_pruned:,} pruned"]]


GAIN_HEADERS = ["homogeneous alternative", "GPUs", "its best plan", "step", "this plan's speedup"]


def gain_rows(plan: Plan) -> list[list[str]]:
    """One row per recorded baseline (none for plans made before baselines were recorded)."""
    assert plan.hetero is not None
    return [[b.label, str(b.gpus), b.plan_summary or "no plan fits",
             "-" if b.step_time_s is None else f"{b.step_time_s:.4g} s", "-" if b.speedup is None else f"{b.speedup:.2f}x"]
            for b in plan.hetero.baselines or []]


def render_markdown(plan: Plan) -> str:
    """The heterogeneous plan's report in Markdown."""
    out = [f"# Plan: {plan.model.name} on {plan.hetero.cluster.name if plan.hetero else ''}", "", "## Summary", ""]
    out += _md_table(["", "value"], _summary(plan))
    out += ["", "## GPU groups", ""] + _md_table(["group", "GPU type", "GPUs", "slow GPUs", "down nodes"], group_rows(plan))
    out += ["", "## Stage / replica map", ""]
    rows = [[_ranges(idx), str(count), str(mbs), f"{w:.3f}", " | ".join(f"{t}@{sp:g} tp{tp}: {n} layers" for _, t, sp, n, tp in st)]
            for count, idx, mbs, w, st in replica_rows(plan)]
    out += _md_table(["replicas", "count", "micro-batches", "grad weight", "stages (GPU type@speed: layers)"], rows)
    if gain_rows(plan):
        out += ["", "## Gain over homogeneous alternatives", ""] + _md_table(GAIN_HEADERS, gain_rows(plan))
    out += ["", "## Assumptions", ""] + [f"- {a}" for a in plan.estimate.assumptions]
    return "\n".join(out) + "\n"


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    cell = lambda text: str(text).replace("|", "\\|")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]


def render_html(plan: Plan) -> str:
    """The heterogeneous plan's report as one self-contained HTML page; stages coloured by group."""
    title = escape(f"Plan: {plan.model.name} on {plan.hetero.cluster.name if plan.hetero else ''}")
    body = [f"<h1>{title}</h1>", "<h2>Summary</h2>", _html_table(["", "value"], _summary(plan))]
    groups = group_rows(plan)
    body += ["<h2>GPU groups</h2>", _html_table(["group", "GPU type", "GPUs", "slow GPUs", "down nodes"], groups,
                                                 [PALETTE[g % len(PALETTE)] for g in range(len(groups))])]
    rows = []
    for count, idx, mbs, w, stages in replica_rows(plan):
        cells = "".join(f'<td style="background:{PALETTE[g % len(PALETTE)]}">{escape(f"{t}@{sp:g} tp{tp}")}<br>{n} layers</td>'
                        for g, t, sp, n, tp in stages)
        rows.append(f"<tr><td>{_ranges(idx)}</td><td>{count}</td><td>{mbs}</td><td>{w:.3f}</td>{cells}</tr>")
    stages = max(len(r[4]) for r in replica_rows(plan))
    head = "".join(f"<th>stage {k}</th>" for k in range(stages))
    body += ["<h2>Stage / replica map</h2>", ("<table><thead><tr><th>replicas</th><th>count</th><th>micro-batches</th>"
                                              f"<th>grad weight</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")]
    if gain_rows(plan):
        body += ["<h2>Gain over homogeneous alternatives</h2>", _html_table(GAIN_HEADERS, gain_rows(plan))]
    body += ["<h2>Assumptions</h2><ul>" + "".join(f"<li>{escape(a)}</li>" for a in plan.estimate.assumptions) + "</ul>"]
    css = "body{font:14px system-ui,sans-serif;max-width:1040px;margin:24px auto}table{border-collapse:collapse}td,th{border:1px solid #d1d9e0;padding:4px 8px}"
    return f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title><style>{css}</style></head><body>{''.join(body)}</body></html>\n"


def _html_table(headers: list[str], rows: list[list[str]], colours: list[str] | None = None) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    trs = []
    for i, r in enumerate(rows):
        style = f' style="background:{colours[i]}"' if colours else ""
        trs.append(f"<tr{style}>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(trs)}</tbody></table>"
