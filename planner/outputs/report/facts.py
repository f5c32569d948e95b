"""What the report says, as rows of plain strings: the same facts feed Markdown and HTML.

Each derived number carries its formula in the row (the DeepSpeed flops profiler's convention,
ecosystem-notes B5). Everything here reads the plan alone; re-estimates live in
:mod:`planner.outputs.report.whatif`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import planner.outputs.report.fmt as fmt
from planner.outputs.report.layout import placements
from planner.estimation.result import memory_part_rows
from planner.plans.schema import Plan

MEMORY_TIGHT = 0.90
"""Peak memory above this fraction of capacity makes memory the binding constraint."""
TIME_PARTS = (("compute", "compute"), ("recompute", "recompute"), ("exposed_comm", "exposed communication"),
              ("pipeline_bubble", "pipeline bubble"), ("optimizer", "optimizer step"))
MEMORY_PARTS = (("params", "parameters"), ("grads", "gradients"), ("optimizer_states", "optimizer states"),
                ("activations", "activations"), ("buffers", "buffers and runtime"))
COMPARED = ("tp", "pp", "cp", "dp", "ep", "vpp", "sp", "zero", "micro_batch", "schedule", "recompute", "stage_layers")
"""Configuration fields shown side by side for the plan and its runner-up."""


@dataclass(frozen=True)
class Row:
    """A labelled value and how it was obtained."""

    label: str
    value: str
    how: str = ""


def headline(plan: Plan) -> str:
    """The plan in one sentence."""
    e = plan.estimate
    return (f"{shape(plan.config.model_dump())}: {fmt.seconds(e.step_time_s)} per step, {fmt.count(e.tokens_per_s)} tokens/s, "
            f"MFU {fmt.percent(e.mfu)}, peak {fmt.gib(e.peak_memory_gib)} of {fmt.gib(e.memory_capacity_gib)} per GPU")


def shape(cfg: dict[str, Any]) -> str:
    """``tp 2 x pp 4 x cp 2 x dp 4`` plus what else is not default."""
    parts = [f"tp {cfg['tp']} x pp {cfg['pp']} x cp {cfg['cp']} x dp {cfg['dp']}"]
    if cfg["ep"] > 1:
        parts.append(f"ep {cfg['ep']}")
    if cfg["vpp"] > 1:
        parts.append(f"vpp {cfg['vpp']}")
    parts.append(f"zero {cfg['zero']}")
    parts.append(f"micro-batch {cfg['micro_batch']}")
    return ", ".join(parts)


def summary_rows(plan: Plan) -> list[Row]:
    """Step time, throughput, MFU, memory against capacity and margin."""
    e, r, g = plan.estimate, plan.request, plan.cluster.gpu
    margin = e.memory_capacity_gib - e.peak_memory_gib
    return [
        Row("predicted step time", fmt.seconds(e.step_time_s), "pipelined micro-batches + bubble + exposed PP/DP communication + optimizer"),
        Row("tokens/s", fmt.count(e.tokens_per_s), f"global batch {r.global_batch} x seq len {r.seq_len} / step time"),
        Row("MFU", fmt.percent(e.mfu), f"model FLOPs / (GPUs {r.gpus} x step time x {g.peak_bf16_tflops:g} TFLOP/s dense BF16 peak of {g.name})"),
        Row("model TFLOP/s per GPU", f"{e.model_tflops_per_gpu:.1f}", "model FLOPs / (GPUs x step time)"),
        Row("peak memory per GPU", f"{fmt.gib(e.peak_memory_gib)} of {fmt.gib(e.memory_capacity_gib)}", "params + grads + optimizer states + activations + buffers, most loaded pipeline rank"),
        Row("memory headroom", fmt.gib(e.memory_headroom_gib), "kept free beyond the peak: the caching allocator's reserve (cluster file, --memory-headroom)"),
        Row("memory margin", f"{fmt.gib(margin)} ({fmt.percent(margin / e.memory_capacity_gib)})", "capacity - peak"),
        Row("fits", "yes" if e.fits else f"no: over by {fmt.gib(e.over_by_gib)}", "peak + headroom <= GPU memory"),
        Row("micro-batches per step", str(plan.schedule.num_microbatches), f"global batch {r.global_batch} / (micro-batch {plan.schedule.micro_batch} x dp {plan.mesh.dp})"),
    ]


def binding_constraint(plan: Plan) -> str:
    """What limits the plan: memory when it is nearly full, else the largest overhead beyond compute."""
    e = plan.estimate
    used = e.peak_memory_gib / e.memory_capacity_gib
    tb = e.time_breakdown_s.model_dump()
    name, worst = max(((label, tb[key]) for key, label in TIME_PARTS if key != "compute"), key=lambda x: x[1])
    overhead = f"the largest cost beyond compute is the {name} ({fmt.seconds(worst)}, {fmt.percent(worst / e.step_time_s)} of the step)"
    if not e.fits:
        return f"memory: the plan does not fit, it needs {fmt.gib(e.peak_memory_gib)} of {fmt.gib(e.memory_capacity_gib)} per GPU (over by {fmt.gib(e.over_by_gib)}); {overhead}"
    if used >= MEMORY_TIGHT:
        return f"memory: the plan uses {fmt.percent(used)} of each GPU's {fmt.gib(e.memory_capacity_gib)}, so faster options that store more did not fit; {overhead}"
    return f"time: memory is {fmt.percent(used)} used; {overhead}"


def _value(cfg: dict[str, Any], key: str) -> str:
    if key == "recompute":
        return "per-layer" if cfg.get("layer_recompute") else str(cfg["recompute"])
    if key == "stage_layers":
        return "even" if not cfg.get("stage_layers") else "/".join(map(str, cfg["stage_layers"]))
    value = cfg[key]
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def runner_up_rows(plan: Plan, alt_time: dict[str, float] | None = None) -> list[tuple[str, str, str, str]]:
    """(field, plan, runner-up, difference) rows: configuration, then step time and memory, then the
    time components when the runner-up was re-estimated (``alt_time``)."""
    if not plan.alternatives:
        return []
    mine, alt = plan.config.model_dump(mode="json"), plan.alternatives[0]
    rows = []
    for key in COMPARED:
        a, b = _value(mine, key), _value(alt.config, key)
        rows.append((key.replace("_", "-"), a, b, "same" if a == b else "differs"))
    e = plan.estimate
    dt = alt.step_time_s - e.step_time_s
    rows.append(("step time", fmt.seconds(e.step_time_s), fmt.seconds(alt.step_time_s), f"{fmt.signed_seconds(dt)} ({fmt.signed_percent(dt / e.step_time_s)})"))
    rows.append(("peak memory", fmt.gib(e.peak_memory_gib), fmt.gib(alt.peak_memory_gib), fmt.signed_gib(alt.peak_memory_gib - e.peak_memory_gib)))
    if alt_time is not None:
        mine_t = e.time_breakdown_s.model_dump()
        for key, label in TIME_PARTS:
            rows.append((label, fmt.seconds(mine_t[key]), fmt.seconds(alt_time[key]), fmt.signed_seconds(alt_time[key] - mine_t[key])))
    return rows


def why_runner_up_lost(plan: Plan, alt_time: dict[str, float] | None = None) -> str:
    """One sentence: what the runner-up changes and what that costs."""
    if not plan.alternatives:
        return "No alternative was kept (top-k 0, or nothing else fits)."
    alt, e = plan.alternatives[0], plan.estimate
    mine = plan.config.model_dump(mode="json")
    changed = [f"{k.replace('_', '-')} {_value(mine, k)} -> {_value(alt.config, k)}" for k in COMPARED if _value(mine, k) != _value(alt.config, k)]
    text = (f"The runner-up ({alt.summary}) changes {', '.join(changed) or 'nothing in the compared fields'}; "
            f"it is {fmt.signed_percent(alt.step_time_s / e.step_time_s - 1)} in step time and {fmt.signed_gib(alt.peak_memory_gib - e.peak_memory_gib)} in peak memory")
    if alt_time is not None:
        mine_t = e.time_breakdown_s.model_dump()
        key, label = max(TIME_PARTS, key=lambda kl: alt_time[kl[0]] - mine_t[kl[0]])
        text += f"; the largest increase is {label} ({fmt.signed_seconds(alt_time[key] - mine_t[key])})"
    return text + "."


def alternative_rows(plan: Plan) -> list[list[str]]:
    """Rank, shape, step time and its change, peak memory and its change, fits, why it lost."""
    e = plan.estimate
    rows = [["chosen", _summary(plan), fmt.seconds(e.step_time_s), "-", fmt.gib(e.peak_memory_gib), "-", "yes" if e.fits else "no",
             "fastest that fits" if e.fits else "closest to fitting (nothing fits)"]]
    for a in plan.alternatives:
        fits = "yes" if a.fits else f"no (over by {fmt.gib(a.peak_memory_gib - e.memory_capacity_gib)})"
        rows.append([str(a.rank), a.summary, fmt.seconds(a.step_time_s), fmt.signed_percent(a.step_time_s / e.step_time_s - 1), fmt.gib(a.peak_memory_gib),
                     fmt.signed_gib(a.peak_memory_gib - e.peak_memory_gib), fits, a.why_lost])
    return rows


def _summary(plan: Plan) -> str:
    from planner.plans.build import summary

    return summary(plan.config)


def stage_rows(plan: Plan) -> list[list[str]]:
    """Stage, pipeline rank, chunk, layers, content, recomputation, time and memory of the rank, ranks, nodes."""
    names, cap = plan.model.layer_names, plan.estimate.memory_capacity_gib
    rows = []
    for s in sorted(plan.stages, key=lambda x: x.index):
        recompute = {m: s.layer_recompute.count(m) for m in ("full", "selective")}
        rc = ", ".join(f"{m} {n} of {len(s.layers)}" for m, n in recompute.items() if n) or "none"
        rows.append([str(s.index), str(s.pp_rank), str(s.virtual_chunk), f"{fmt.ranges(s.layers)} ({len(s.layers)})", content(names, s.layers), rc,
                     fmt.seconds(s.time_per_microbatch_s), f"{fmt.gib(s.memory_gib)} ({fmt.percent(s.memory_gib / cap, 0)})",
                     f"{s.ranks[0]}-{s.ranks[1]}", f"{s.nodes[0]}-{s.nodes[1]}" if s.nodes[0] != s.nodes[1] else str(s.nodes[0])])
    return rows


def content(names: list[str], layers: list[int]) -> str:
    """``embedding + 19 x block``."""
    runs: list[list[Any]] = []
    for i in layers:
        if runs and runs[-1][0] == names[i]:
            runs[-1][1] += 1
        else:
            runs.append([names[i], 1])
    return " + ".join(f"{n} x {name}" if n > 1 else name for name, n in runs) or "(empty)"


def sharding_line(plan: Plan) -> str:
    """What every stage splits, and over which group."""
    m = plan.mesh
    group = m.dp * m.cp
    zero = {0: "nothing is sharded over data parallelism (plain all-reduce)",
            1: f"optimizer states are sharded {group}-way over dp x cp (distributed optimizer)",
            2: f"gradients and optimizer states are sharded {group}-way over dp x cp",
            3: f"parameters, gradients and optimizer states are sharded {group}-way over dp x cp"}[m.zero]
    acts = [f"split {m.tp}-way by TP" + (" with sequence parallelism" if m.sp and m.tp > 1 else "")] if m.tp > 1 else []
    if m.cp > 1:
        acts.append(f"{m.cp}-way along the sequence by CP")
    return (f"Weights are split {m.tp}-way by TP" + (f" and experts {m.ep}-way by EP" if m.ep > 1 else "") + f"; ZeRO-{m.zero}: {zero}; "
            + ("activations are " + " and ".join(acts) if acts else "activations are not split") + ".")


def placement_rows(plan: Plan) -> list[list[str]]:
    """Dimension, degree, rank stride, first group, where groups run, link time per step."""
    links = plan.estimate.link_time_s.model_dump()
    rows = []
    for p in placements(plan.mesh):
        where = "-" if p.size == 1 else (f"across the network ({p.nodes_spanned} nodes per group)" if p.crosses_network else "inside one node (NVLink)")
        ranks = ", ".join(map(str, p.first_group[:8])) + (", ..." if len(p.first_group) > 8 else "")
        rows.append([p.dim.upper(), str(p.size), str(p.stride), f"{{{ranks}}}", where, fmt.seconds(links.get(p.dim, 0.0))])
    return rows


def time_rows(plan: Plan) -> list[list[str]]:
    """Component, seconds, share of the step."""
    e = plan.estimate
    tb = e.time_breakdown_s.model_dump()
    return [[label, fmt.seconds(tb[key]), fmt.percent(tb[key] / e.step_time_s)] for key, label in TIME_PARTS]


def link_rows(plan: Plan) -> list[list[str]]:
    """Per dimension: link time (busy links, hidden or not) per step."""
    links = plan.estimate.link_time_s.model_dump()
    return [[k.upper(), fmt.seconds(v), fmt.percent(v / plan.estimate.step_time_s)] for k, v in links.items()]


def memory_rows(plan: Plan) -> list[list[str]]:
    """Part, GiB, share of the GPU's memory, for the most loaded GPU: the parts, their total, the
    headroom kept free beyond the prediction (``ClusterSpec.memory_headroom_gib``), the margin left."""
    e = plan.estimate
    gpu = e.memory_capacity_gib + e.memory_headroom_gib
    mb = e.memory_breakdown_gib.model_dump()
    rows = [[label, fmt.gib(gib), fmt.percent(gib / gpu) if share else "-"] for label, gib, share in memory_part_rows(mb, MEMORY_PARTS)]
    rows.append(["total (peak)", fmt.gib(e.peak_memory_gib), fmt.percent(e.peak_memory_gib / gpu)])
    rows.append(["headroom (kept free: allocator reserve)", fmt.gib(e.memory_headroom_gib), fmt.percent(e.memory_headroom_gib / gpu)])
    rows.append(["free (margin)", fmt.gib(e.memory_capacity_gib - e.peak_memory_gib), fmt.percent((e.memory_capacity_gib - e.peak_memory_gib) / gpu)])
    return rows


def search_rows(plan: Plan) -> list[Row]:
    """Status, gap, candidates, solver, time."""
    s = plan.search
    status = {"optimal": "proven optimal within the search space", "feasible": "best found; not proven optimal",
              "timeout": "the time limit stopped the search"}[s.status]
    return [
        Row("status", f"{s.status} ({status})"),
        Row("optimality gap", fmt.percent(s.optimality_gap, 2), "(plan - best unexplored lower bound) / plan"),
        Row("candidates evaluated", fmt.count(s.candidates_evaluated)),
        Row("candidates pruned", fmt.count(s.candidates_pruned), "by memory or time lower bounds"),
        Row("solver", s.solver),
        Row("search wall time", fmt.seconds(s.wall_time_s) if s.wall_time_s is not None else "not recorded (plan --timing records it)"),
        Row("time limit", fmt.seconds(s.time_limit_s) if s.time_limit_s else "none"),
    ]


def input_rows(plan: Plan) -> list[Row]:
    """Model, cluster, request, versions."""
    c, r, m = plan.cluster, plan.request, plan.model
    return [
        Row("model", f"{m.name} ({m.params / 1e9:.2f} B parameters, {m.num_layers} layers)", m.source),
        Row("cluster", f"{c.name}: {plan.mesh.nodes} nodes x {c.gpus_per_node} {c.gpu.name} ({c.gpu.hbm_gib:g} GiB, {c.gpu.peak_bf16_tflops:g} TFLOP/s BF16)", c.source),
        Row("links", f"{c.intra_node_bandwidth_gbps:g} GB/s per GPU inside a node, {c.network_bandwidth_gbps:g} GB/s per GPU across nodes"),
        Row("request", f"{r.gpus} GPUs, global batch {r.global_batch}, seq len {r.seq_len}, target {r.target}, top-k {r.top_k}"),
        Row("versions", f"meshplan {plan.planner_version}, plan schema {plan.schema_version}"),
    ]


def assumption_rows(plan: Plan) -> list[Row]:
    """Efficiencies, overlap, FLOP convention, memory, with their sources."""
    c, cfg = plan.cluster, plan.config
    eff = c.efficiency
    rows = [
        Row("compute efficiency", f"GEMM up to {fmt.percent(eff.gemm_max)} of peak (half at {eff.gemm_half_gflop:g} GFLOP), attention {fmt.percent(eff.attention)}, memory-bound kernels {fmt.percent(eff.memory)} of HBM bandwidth", c.source),
        Row("communication efficiency", f"{fmt.percent(eff.intra_node)} of NVLink, {fmt.percent(eff.network)} of the network; hidden communication slows compute by {fmt.percent(eff.overlap_slowdown)}", c.source),
        Row("overlap", f"gradient reduction {'overlaps' if cfg.overlap_grad_reduce else 'does not overlap'} backward; parameter gathers {'overlap' if cfg.overlap_param_gather else 'do not overlap'} forward; TP communication {'overlaps' if cfg.tp_comm_overlap else 'does not overlap'} GEMMs", "ParallelConfig"),
        Row("precision", f"{cfg.param_bytes} B parameters, {cfg.grad_bytes} B gradients, {cfg.optimizer_bytes} B optimizer state per parameter, {cfg.grad_reduce_bytes} B gradient reduction", "Megatron-LM mixed precision (theoretical_memory_usage.py)"),
        Row("memory capacity", f"{fmt.gib(c.gpu.hbm_gib)} per GPU as PyTorch reports it, {fmt.gib(c.runtime_overhead_gib)} of it taken by CUDA context, NCCL and framework", c.gpu.source),
        Row("attention kernel", cfg.attention, "flash unless the GPU lacks FlashAttention"),
    ]
    rows += [Row("estimator", a) for a in plan.estimate.assumptions]
    return rows
