"""A uniform plan for engines that cannot run heterogeneous ones (``--target megatron|torchtitan|deepspeed``).

Megatron-LM, torchtitan and DeepSpeed give every data-parallel replica the same micro-batches and
every pipeline stage the same GPU type. On a mixed or degraded cluster the plan they can run is a
homogeneous plan on healthy GPUs of one type: for each group, its nodes that are up and whose GPUs
all run at full speed (the slow and lost ones are kept out); the homogeneous search
(``planner.plans.build.plan``) plans each such set (all its nodes, else the largest power of two
of them) and the fastest plan wins. The plan's assumptions name the nodes it runs on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from costmodel.hetero import ClusterGroup, HeteroCluster
from planner.errors import InputError, NoFeasiblePlanError
from planner.plans.schema import Plan


def healthy_nodes(cluster: HeteroCluster, group: int) -> list[int]:
    """Cluster-wide indices of ``group``'s nodes that are up with every GPU at full speed."""
    g: ClusterGroup = cluster.groups[group]
    gpn = g.cluster.gpus_per_node
    return [cluster.first_node(group) + n for n in g.alive_nodes()
            if all(g.speed(n * gpn + i) == 1.0 for i in range(gpn))]


def node_counts(healthy: int) -> list[int]:
    """Node counts to try: all the healthy nodes, then the largest power of two below (distinct)."""
    power = 1 << (healthy.bit_length() - 1) if healthy else 0
    return [n for n in dict.fromkeys((healthy, power)) if n > 0]


def plan_uniform(cluster: HeteroCluster, target: str, homogeneous: Callable[..., Plan], **kwargs: Any) -> Plan:
    """The fastest homogeneous plan on one group's healthy nodes; ``homogeneous`` is
    ``planner.plans.build.plan`` (called with ``cluster`` and ``gpus`` set, ``kwargs`` passed on)."""
    best: Plan | None = None
    misses: list[str] = []
    for g, group in enumerate(cluster.groups):
        nodes = healthy_nodes(cluster, g)
        for count in node_counts(len(nodes)):
            try:
                plan = homogeneous(cluster=group.cluster, gpus=count * group.cluster.gpus_per_node, target=target, **kwargs)
            except NoFeasiblePlanError as err:
                misses.append(f"{count} nodes of {group.cluster.name}: {str(err)[:120]}")
                continue
            plan = _noted(plan, cluster, g, nodes[:count], target)
            if best is None or plan.estimate.step_time_s < best.estimate.step_time_s:
                best = plan
            break
    if best is None:
        if not misses:
            raise InputError(f"--target {target}: no node of {cluster.name} is healthy (every node is slow or down); "
                             "plan it with --target native")
        raise NoFeasiblePlanError(f"--target {target}: no uniform plan fits on the healthy GPUs of one type; " + "; ".join(misses), None)
    return best


def _noted(plan: Plan, cluster: HeteroCluster, group: int, nodes: list[int], target: str) -> Plan:
    """``plan`` with an assumption naming where it runs and what it leaves out."""
    total = sum(g.nodes for g in cluster.groups)
    left = [n for n in range(total) if n not in nodes]
    note = (f"--target {target} cannot run uneven data-parallel shares or per-stage GPU types: uniform plan on the healthy "
            f"nodes {nodes} of group {group} ({cluster.groups[group].cluster.name}) of {cluster.name}; "
            f"left out: nodes {left} (slow, down or another GPU type)")
    estimate = plan.estimate.model_copy(update={"assumptions": [*plan.estimate.assumptions, note]})
    return plan.model_copy(update={"estimate": estimate})
