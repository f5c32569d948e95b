"""The serving plan as one self-contained HTML page: the chosen deployment, the throughput-per-GPU vs
tokens-per-user Pareto frontier (SVG, the chosen point marked) and each GPU's memory. Reuses the
training report's SVG writer and page style; no scripts, no network loads."""

from __future__ import annotations

from html import escape

from planner.outputs.report.html import CSS, figure, p, section, table
from planner.outputs.report.svg import PALETTE, Svg, nice_step
from planner.serving.schema import ServingPlan, WorkerGroup

CHOSEN = "#e45756"
"""Colour of the chosen deployment on the frontier chart."""
MEMORY_PARTS = (("weights", PALETTE[0]), ("kv_cache", PALETTE[2]), ("activations_workspace", PALETTE[1]),
                ("runtime", PALETTE[9]))


def _cards(plan: ServingPlan) -> str:
    e = plan.estimate
    items = [(f"{e.output_tokens_per_s_per_gpu:,.0f}", "output tokens/s per GPU"),
             (f"{e.tokens_per_s_per_user:,.1f}", "tokens/s per user"), (f"{e.ttft_ms:,.0f} ms", "TTFT"),
             (f"{e.tpot_ms:,.1f} ms", "TPOT"), (f"{e.deployment.gpus}", f"GPUs ({e.deployment.mode})")]
    return '<div class="cards">' + "".join(f"<div class='card'><b>{escape(v)}</b><span>{escape(k)}</span></div>" for v, k in items) + "</div>"


def _deployment(plan: ServingPlan) -> str:
    rows = [[g.role, str(g.workers), str(g.gpus_per_worker), f"tp{g.tp} pp{g.pp} ep{g.ep}", "yes" if g.attention_dp else "no",
             str(g.concurrency_per_worker), str(g.max_concurrency_per_worker)] for g in plan.estimate.deployment.groups]
    return table(["role", "workers", "GPUs each", "parallelism", "attention DP", "in flight", "KV cache holds"],
                 rows, numeric=(1, 2, 5, 6))


def frontier_svg(plan: ServingPlan) -> str:
    """Throughput per GPU (y) against tokens/s per user (x): frontier points, the chosen one marked."""
    pts = plan.frontier
    w, h, left, bottom, top = 760.0, 380.0, 70.0, 46.0, 48.0
    svg = Svg(w, h, "Pareto frontier: output tokens/s per GPU against tokens/s per user")
    xs = [f.tokens_per_s_per_user for f in pts] + [plan.estimate.tokens_per_s_per_user]
    ys = [f.output_tokens_per_s_per_gpu for f in pts] + [plan.estimate.output_tokens_per_s_per_gpu]
    xstep, ystep = nice_step(max(xs)), nice_step(max(ys))
    xmax, ymax = xstep * (int(max(xs) / xstep) + 1), ystep * (int(max(ys) / ystep) + 1)
    px = lambda x: left + (w - left - 20) * x / xmax  # noqa: E731
    py = lambda y: h - bottom - (h - bottom - top) * y / ymax  # noqa: E731
    for i in range(int(round(ymax / ystep)) + 1):
        y = i * ystep
        svg.line(left, py(y), w - 20, py(y), stroke="#e6e9ed")
        svg.text(left - 6, py(y) + 4, f"{y:,.0f}", size=11, anchor="end")
    for i in range(int(round(xmax / xstep)) + 1):
        x = i * xstep
        svg.text(px(x), h - bottom + 16, f"{x:,.0f}", size=11, anchor="middle")
    svg.line(left, h - bottom, w - 20, h - bottom)
    svg.line(left, top, left, h - bottom)
    svg.text((left + w) / 2, h - 8, "tokens/s per user (1 / TPOT)", size=12, anchor="middle")
    svg.text(8, top - 14, "output tokens/s per GPU", size=12)
    for a, b in zip(pts, pts[1:]):
        svg.line(px(a.tokens_per_s_per_user), py(a.output_tokens_per_s_per_gpu), px(b.tokens_per_s_per_user),
                 py(b.output_tokens_per_s_per_gpu), stroke=PALETTE[0], width=2)
    for f in pts:
        colour = PALETTE[0] if f.meets_targets else "#9aa4ae"
        svg.rect(px(f.tokens_per_s_per_user) - 4, py(f.output_tokens_per_s_per_gpu) - 4, 8, 8, colour,
                 tip=f"{f.label}: {f.output_tokens_per_s_per_gpu:,.0f} tok/s/GPU, {f.tokens_per_s_per_user:.1f} tok/s/user")
    cx, cy = px(plan.estimate.tokens_per_s_per_user), py(plan.estimate.output_tokens_per_s_per_gpu)
    svg.rect(cx - 8, cy - 8, 16, 16, CHOSEN, tip="chosen deployment", stroke="#7a1f1f")
    svg.text(min(cx + 12, w - 200), max(cy - 10, top + 10), "chosen", size=12, fill=CHOSEN, bold=True)
    svg.legend(left + 190, 16, [(PALETTE[0], "meets targets"), ("#9aa4ae", "misses targets"), (CHOSEN, "chosen")])
    return svg.render()


def memory_svg(groups: list[WorkerGroup]) -> str:
    """One stacked bar per worker role: weights, KV cache, workspace, runtime against capacity."""
    w, bar, gap, left = 760.0, 26.0, 18.0, 110.0
    h = 50 + len(groups) * (bar + gap) + 30
    svg = Svg(w, h, "Memory per GPU by worker role (GiB)")
    cap = max(g.memory_gib.capacity for g in groups)
    scale = (w - left - 30) / cap
    for i, g in enumerate(groups):
        y, x = 20 + i * (bar + gap), left
        svg.text(left - 8, y + bar * 0.65, g.role, size=12, anchor="end")
        for key, colour in MEMORY_PARTS:
            value = getattr(g.memory_gib, key)
            svg.rect(x, y, value * scale, bar, colour, tip=f"{key}: {value:.1f} GiB")
            x += value * scale
        svg.rect(left, y, g.memory_gib.capacity * scale, bar, "none", stroke="#333", tip=f"capacity {g.memory_gib.capacity:.1f} GiB")
    svg.legend(left, h - 12, [(c, k.replace("_", " ")) for k, c in MEMORY_PARTS])
    return svg.render()


def _alternatives(plan: ServingPlan) -> str:
    rows = [[a.label, f"{a.output_tokens_per_s_per_gpu:,.1f}", f"{a.ttft_ms:,.1f}", f"{a.tpot_ms:,.2f}", a.why]
            for a in plan.alternatives]
    return table(["deployment", "tok/s per GPU", "TTFT ms", "TPOT ms", "why it lost"], rows, numeric=(1, 2, 3))


def render_serving_html(plan: ServingPlan) -> str:
    """The report page."""
    e, r = plan.estimate, plan.request
    targets = ", ".join(t for t in (f"TTFT <= {r.ttft_ms:g} ms" if r.ttft_ms else "",
                                    f"TPOT <= {r.tpot_ms:g} ms" if r.tpot_ms else "") if t) or "no latency targets"
    lead = (f"{plan.model} on {plan.cluster}, {r.gpus} GPUs; prompts of {r.isl} and answers of {r.osl} tokens; "
            f"{r.precision} weights, {r.kv_dtype} KV cache, {r.engine}; {targets}.")
    mem_rows = [[g.role, *(f"{getattr(g.memory_gib, k):.2f}" for k, _ in MEMORY_PARTS), f"{g.memory_gib.capacity:.2f}"]
                for g in e.deployment.groups]
    body = [
        "<h1>Serving plan</h1>", p(lead, "lead"), _cards(plan),
        section("deployment", "Deployment", _deployment(plan),
                p(f"Bottleneck: {e.bottleneck}. Sequences in flight: {e.concurrency} of the {e.max_concurrency} the KV caches hold.")),
        section("frontier", "Throughput per GPU against speed per user",
                figure(frontier_svg(plan), "Pareto frontier of every deployment that fits; the chosen one in red.")),
        section("memory", "Memory per GPU", figure(memory_svg(e.deployment.groups), "GiB per GPU of each worker role."),
                table(["role", "weights", "KV cache", "workspace", "runtime", "capacity"], mem_rows, numeric=(1, 2, 3, 4, 5))),
        section("alternatives", "Runners-up", _alternatives(plan)),
        section("assumptions", "Assumptions", "<ul>" + "".join(f"<li>{escape(a)}</li>" for a in e.assumptions) + "</ul>"),
    ]
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>meshplan serving plan: {escape(plan.model)}</title>"
            f"<style>{CSS}</style></head><body><main>{''.join(body)}</main></body></html>\n")
