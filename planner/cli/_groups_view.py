"""``meshplan list clusters --cluster C:N,C:N [--slow ...] [--down ...]``: the groups of a mixed or
degraded cluster, numbered as ``--slow`` / ``--down`` and the plan's devices number them."""

from __future__ import annotations

from typing import Any

Rows = tuple[str, list[str], list[list[str]]]


def group_rows(cluster: Any, slow: Any = None, down: Any = None) -> Rows:
    """One row per group (GPU and node ranges, slow GPUs, down nodes), then one per link between groups;
    bad input raises ``InputError`` with one line."""
    from planner.intake.groups import resolve_hetero

    hetero = resolve_hetero(cluster, None, slow, down)
    headers = ["group", "preset", "gpu", "GiB/GPU", "GPUs", "nodes", "slow GPUs", "down nodes"]
    rows = []
    for g, group in enumerate(hetero.groups):
        first, node = hetero.first_gpu(g), hetero.first_node(g)
        slow_gpus = [f"{first + i}={group.speed(i):g}" for i in range(group.gpus) if group.speed(i) < 1.0]
        rows.append([str(g), group.cluster.name, group.cluster.gpu.name, f"{group.cluster.gpu.hbm_gib:g}",
                     f"{first}..{first + group.gpus - 1}", f"{node}..{node + group.nodes - 1}",
                     ", ".join(slow_gpus) or "-", ", ".join(str(node + n) for n in group.down_nodes) or "-"])
    for a in range(len(hetero.groups)):
        for b in range(a + 1, len(hetero.groups)):
            link = hetero.link(a, b)
            rows.append([f"link {a}-{b}", "", "", "", f"{link.bandwidth_gbps:g} GB/s per GPU", f"{link.latency_us:g} us", "", ""])
    return f"groups of {hetero.name} ({hetero.gpus} GPUs)", headers, rows
