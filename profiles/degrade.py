"""Slow and lost GPUs: ``--slow 5=0.5``, ``--slow node:2=0.7``, ``--down node:3`` applied to a cluster.

GPU and node indices are cluster-wide (group after group, ``costmodel.hetero``). A speed scales the
GPU's compute and links (the assumption is stated once, in ``costmodel.hetero``). Bad input raises
:class:`ProfileError` (a ``ValueError``) with one line; the planner maps it to its input error.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from costmodel.hetero import HeteroCluster
from profiles.errors import ProfileError


@dataclass(frozen=True)
class Slowdown:
    """One ``--slow`` item: a GPU (``node`` False) or every GPU of a node, at ``speed`` in (0, 1]."""

    index: int
    speed: float
    node: bool = False


def parse_slow(text: str | Iterable[str] | None) -> tuple[Slowdown, ...]:
    """``"5=0.5,node:2=0.7"`` (or several such strings) as slowdowns; a later item wins."""
    out = []
    for item in _items(text):
        target, sep, value = item.partition("=")
        if not sep:
            raise ProfileError(f"--slow '{item}': write GPU=SPEED or node:N=SPEED (e.g. 5=0.5, node:2=0.7)")
        node, index = _index(target.strip(), "--slow", item)
        try:
            speed = float(value)
        except ValueError:
            raise ProfileError(f"--slow '{item}': the speed must be a number in (0, 1], got '{value.strip()}'") from None
        if not 0 < speed <= 1:
            raise ProfileError(f"--slow '{item}': the speed must lie in (0, 1] (a fraction of full speed), got {speed:g}")
        out.append(Slowdown(index, speed, node))
    return tuple(out)


def parse_down(text: str | Iterable[str] | None) -> tuple[int, ...]:
    """``"node:3,node:5"`` as cluster-wide node indices."""
    nodes = []
    for item in _items(text):
        node, index = _index(item, "--down", item)
        if not node:
            raise ProfileError(f"--down '{item}': a whole node goes down: write node:N (a slow GPU is --slow N=SPEED)")
        nodes.append(index)
    return tuple(dict.fromkeys(nodes))


def degrade(cluster: HeteroCluster, slow: str | Iterable[str] | None = None,
            down: str | Iterable[str] | None = None) -> HeteroCluster:
    """``cluster`` with the ``--slow`` speeds and ``--down`` nodes applied (parsed here)."""
    return apply(cluster, parse_slow(slow), parse_down(down))


def apply(cluster: HeteroCluster, slow: Iterable[Slowdown], down: Iterable[int]) -> HeteroCluster:
    """``cluster`` with speeds set and nodes marked down; indices are checked against the cluster."""
    speeds = [[g.speed(i) for i in range(g.gpus)] for g in cluster.groups]
    downs = [set(g.down_nodes) for g in cluster.groups]
    nodes = sum(g.nodes for g in cluster.groups)
    for item in slow:
        for gpu in _gpus_of(cluster, item, nodes):
            group, local = _locate_gpu(cluster, gpu)
            speeds[group][local] = item.speed
    for node in down:
        if not 0 <= node < nodes:
            raise ProfileError(f"--down node:{node}: the cluster has nodes 0..{nodes - 1}")
        group, local = _locate_node(cluster, node)
        downs[group].add(local)
    if all(len(d) == g.nodes for d, g in zip(downs, cluster.groups)):
        raise ProfileError(f"--down takes every one of the cluster's {nodes} nodes: nothing is left to train on")
    groups = tuple(
        g.model_copy(update={"speeds": tuple(s) if any(x != 1.0 for x in s) else (), "down_nodes": tuple(sorted(d))})
        for g, s, d in zip(cluster.groups, speeds, downs)
    )
    return cluster.model_copy(update={"groups": groups})


def _items(text: str | Iterable[str] | None) -> list[str]:
    """Comma-joined items of one string or of several."""
    if text is None:
        return []
    parts = [text] if isinstance(text, str) else list(text)
    items = [item.strip() for part in parts for item in part.split(",")]
    if any(not item for item in items):
        raise ProfileError(f"empty item in '{','.join(parts)}'")
    return items


def _index(target: str, flag: str, item: str) -> tuple[bool, int]:
    """(is a node, index) of ``5`` or ``node:2``."""
    node = target.lower().startswith("node:")
    digits = target[5:].strip() if node else target
    if not digits.isdigit():
        raise ProfileError(f"{flag} '{item}': '{target}' is not a GPU index or node:N")
    return node, int(digits)


def _gpus_of(cluster: HeteroCluster, item: Slowdown, nodes: int) -> list[int]:
    """Cluster-wide GPU indices an item covers, checked against the cluster."""
    if item.node:
        if not 0 <= item.index < nodes:
            raise ProfileError(f"--slow node:{item.index}: the cluster has nodes 0..{nodes - 1}")
        group, local = _locate_node(cluster, item.index)
        gpn = cluster.groups[group].cluster.gpus_per_node
        first = cluster.first_gpu(group) + local * gpn
        return list(range(first, first + gpn))
    if not 0 <= item.index < cluster.gpus:
        raise ProfileError(f"--slow {item.index}: GPU {item.index} is past the cluster's {cluster.gpus} GPUs (0..{cluster.gpus - 1})")
    return [item.index]


def _locate_gpu(cluster: HeteroCluster, gpu: int) -> tuple[int, int]:
    """(group, index inside the group) of a cluster-wide GPU index."""
    for g in range(len(cluster.groups)):
        if gpu < cluster.first_gpu(g) + cluster.groups[g].gpus:
            return g, gpu - cluster.first_gpu(g)
    raise ProfileError(f"GPU {gpu} is past the cluster's {cluster.gpus} GPUs")


def _locate_node(cluster: HeteroCluster, node: int) -> tuple[int, int]:
    """(group, node inside the group) of a cluster-wide node index."""
    for g in range(len(cluster.groups)):
        if node < cluster.first_node(g) + cluster.groups[g].nodes:
            return g, node - cluster.first_node(g)
    raise ProfileError(f"node {node} is past the cluster's nodes")
