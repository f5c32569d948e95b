"""Plain-text summaries of a serving estimate and a serving plan (what the commands print without --json)."""

from __future__ import annotations

from typing import Any


def estimate_lines(e: dict[str, Any]) -> list[str]:
    """Aligned ``label: value`` lines of a ``serve-estimate`` result (its ``model_dump()``)."""
    dep = e["deployment"]
    lines = [f"{e['model']} on {dep['gpus']} x {e['cluster']} ({dep['mode']}), isl {e['isl']} / osl {e['osl']}, "
             f"{e['precision']} weights, {e['kv_dtype']} KV, {e['engine']}"]
    for g in dep["groups"]:
        lines.append(f"  {g['role']:<10} {g['workers']} x tp{g['tp']} pp{g['pp']} ep{g['ep']}"
                     f"{' attention-dp' if g['attention_dp'] else ''}: {g['concurrency_per_worker']} in flight "
                     f"(KV holds {g['max_concurrency_per_worker']})")
    mem = e["memory_breakdown_gib"]
    rows = [
        ("output tokens/s", f"{e['output_tokens_per_s']:,.1f}"),
        ("output tokens/s per GPU", f"{e['output_tokens_per_s_per_gpu']:,.1f}"),
        ("tokens/s per user", f"{e['tokens_per_s_per_user']:,.2f}"),
        ("TTFT", f"{e['ttft_ms']:,.1f} ms"), ("TPOT", f"{e['tpot_ms']:,.2f} ms"),
        ("concurrency", f"{e['concurrency']} (KV cache limit {e['max_concurrency']})"),
        ("memory per GPU (GiB)", ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in mem.items())),
        ("fits", "yes" if e["fits"] else f"no: short by {e['shortfall_gib']:.2f} GiB per GPU"),
        ("bottleneck", e["bottleneck"]),
    ]
    width = max(len(k) for k, _ in rows)
    return lines + [f"{k:<{width}}  {v}" for k, v in rows]


def plan_lines(plan: dict[str, Any]) -> list[str]:
    """The chosen deployment, then the runners-up with why each lost."""
    used, given = plan["estimate"]["deployment"]["gpus"], plan["request"]["gpus"]
    lines = [f"chosen ({used} of {given} GPUs): " + estimate_lines(plan["estimate"])[0]] + estimate_lines(plan["estimate"])[1:]
    if plan["alternatives"]:
        lines.append("runners-up:")
        lines += [f"  {a['label']}: {a['output_tokens_per_s_per_gpu']:,.1f} tok/s/GPU, TTFT {a['ttft_ms']:.1f} ms, "
                  f"TPOT {a['tpot_ms']:.2f} ms ({a['why']})" for a in plan["alternatives"]]
    s = plan["search"]
    lines.append(f"searched {s['candidates']} deployments, {s['feasible']} meet the targets; "
                 f"{len(plan['frontier'])} on the Pareto frontier")
    return lines
