"""Where the plan's communication groups land on the cluster.

Ranks follow ``mesh.rank_order`` fastest-varying first; Megatron's default ``tp-cp-ep-dp-pp``
(``parallel_state.py``, ecosystem-notes B1) gives dense layers the coordinates
rank = tp_i + tp·(cp_i + cp·(dp_i + dp·pp_i)) — EP is carved out of dp x cp, so it is no axis of its
own there. Expert layers use ``tp-ep-dp-pp`` with expert TP = TP, so an EP group's ranks are ``tp``
apart. Node n holds ranks n·g .. n·g + g - 1 (g GPUs per node).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.plans.schema import Mesh

DENSE_AXES = ("tp", "cp", "dp", "pp")
"""Axes of the dense rank grid (product = GPUs)."""


@dataclass(frozen=True)
class Placement:
    """One parallel dimension's communication groups on the cluster."""

    dim: str
    size: int
    stride: int
    """Rank distance between neighbours of a group."""
    groups: int
    nodes_spanned: int
    """Most nodes any one group touches (1 = inside a node)."""
    first_group: tuple[int, ...]

    @property
    def crosses_network(self) -> bool:
        return self.nodes_spanned > 1


def axis_order(mesh: Mesh) -> list[str]:
    """The dense axes in the plan's rank order (fastest first), ``ep`` dropped."""
    order = [a for a in mesh.rank_order.split("-") if a in DENSE_AXES]
    return order + [a for a in DENSE_AXES if a not in order]


def strides(mesh: Mesh) -> dict[str, int]:
    """Rank distance of one step along each dense axis."""
    out, step = {}, 1
    for axis in axis_order(mesh):
        out[axis] = step
        step *= getattr(mesh, axis)
    return out


def coordinates(rank: int, mesh: Mesh) -> dict[str, int]:
    """``{"tp": .., "cp": .., "dp": .., "pp": ..}`` of a global rank."""
    out = {}
    for axis in axis_order(mesh):
        size = getattr(mesh, axis)
        out[axis] = rank % size
        rank //= size
    return out


def world(mesh: Mesh) -> int:
    """GPUs of the dense grid."""
    return mesh.tp * mesh.cp * mesh.dp * mesh.pp


def placements(mesh: Mesh) -> list[Placement]:
    """Group placement of TP, CP, EP, DP and PP (the ones with degree > 1 first in rank order)."""
    s = strides(mesh)
    dims = [(axis, getattr(mesh, axis), s[axis]) for axis in axis_order(mesh)]
    dims.insert(axis_order(mesh).index("dp"), ("ep", mesh.ep, mesh.tp))
    return [_place(mesh, dim, size, stride) for dim, size, stride in dims]


def _place(mesh: Mesh, dim: str, size: int, stride: int) -> Placement:
    """Enumerate every group of ``size`` ranks ``stride`` apart and count the nodes each touches."""
    n, g = world(mesh), mesh.gpus_per_node
    spanned, first = 1, tuple(k * stride for k in range(size))
    for base in range(n):
        if (base // stride) % size:  # not the first member of its group
            continue
        nodes = {(base + k * stride) // g for k in range(size)}
        spanned = max(spanned, len(nodes))
    return Placement(dim=dim, size=size, stride=stride, groups=n // size, nodes_spanned=spanned, first_group=first)


def node_ranks(mesh: Mesh, node: int) -> list[int]:
    """Global ranks on ``node``."""
    g = mesh.gpus_per_node
    return [r for r in range(node * g, (node + 1) * g) if r < world(mesh)]


def pp_ranks_of_node(mesh: Mesh, node: int) -> list[int]:
    """Pipeline ranks that have GPUs on ``node``."""
    return sorted({coordinates(r, mesh)["pp"] for r in node_ranks(mesh, node)})
