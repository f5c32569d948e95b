"""Collective communication time over a two-level topology (NVLink inside a node, network across).

Model: time = hops·α + factor·S / (B·η) (Hockney α–β; Thakur, Rabenseifner & Gropp, IJHPCA 2005),
with the nccl-tests bus-bandwidth factors (NVIDIA/nccl-tests doc/PERFORMANCE.md): all-reduce
2(n−1)/n, all-gather / reduce-scatter / all-to-all (n−1)/n. A group that spans nodes runs the
hierarchical algorithm of costmodel-notes 2.6.2: reduce-scatter inside the node, the cross-node step on
S/g bytes over every GPU's own NIC, all-gather inside the node. ``B`` is the unidirectional per-GPU
bandwidth and ``η`` the achieved busbw fraction from the cluster's efficiency spec.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.specs import ClusterSpec


@dataclass(frozen=True)
class Group:
    """A communicator laid out on the cluster: ``size`` ranks, ``per_node`` of them in each node."""

    size: int
    per_node: int

    @property
    def nodes(self) -> int:
        return max(1, self.size // self.per_node)


def place_group(size: int, stride: int, gpus_per_node: int) -> Group:
    """Lay out a group whose ranks are ``stride`` apart in the global rank order.

    Megatron orders ranks ``tp-cp-ep-dp-pp`` (TP fastest, so inside a node; ecosystem-notes B1):
    a group of stride ``k`` puts ``gpus_per_node / k`` of its ranks in each node when k < node size.
    """
    per_node = max(1, min(size, gpus_per_node // max(1, stride)))
    return Group(size=size, per_node=per_node)


def _ring_time(n: int, factor: float, nbytes: float, bw_gbps: float, eff: float, hops: int, lat_us: float) -> float:
    if n <= 1 or nbytes <= 0:
        return 0.0
    return hops * lat_us * 1e-6 + factor * nbytes / (bw_gbps * 1e9 * eff)


def _intra(cluster: ClusterSpec, n: int, factor_per_rank: float, nbytes: float, steps: int) -> float:
    eff = cluster.efficiency.intra_node
    return _ring_time(n, factor_per_rank, nbytes, cluster.intra_node_bandwidth_gbps, eff, steps, cluster.intra_node_latency_us)


def _inter(cluster: ClusterSpec, k: int, factor_per_rank: float, nbytes: float, steps: int) -> float:
    eff = cluster.efficiency.network
    return _ring_time(k, factor_per_rank, nbytes, cluster.network_bandwidth_gbps, eff, steps, cluster.network_latency_us)


def reduce_scatter(cluster: ClusterSpec, group: Group, nbytes: float) -> float:
    """Reduce-scatter of an ``nbytes`` buffer (each rank keeps nbytes/n): (n−1)/n·S/B per level."""
    return _one_pass(cluster, group, nbytes)


def all_gather(cluster: ClusterSpec, group: Group, nbytes: float) -> float:
    """All-gather into an ``nbytes`` buffer (each rank contributes nbytes/n): (n−1)/n·S/B per level."""
    return _one_pass(cluster, group, nbytes)


def all_reduce(cluster: ClusterSpec, group: Group, nbytes: float) -> float:
    """All-reduce of ``nbytes``: a reduce-scatter then an all-gather (ring; 2(n−1)/n·S/B)."""
    return 2.0 * _one_pass(cluster, group, nbytes)


def _one_pass(cluster: ClusterSpec, group: Group, nbytes: float) -> float:
    """One ring pass (RS or AG), hierarchical when the group spans nodes (costmodel-notes 2.6.2)."""
    g, k = group.per_node, group.nodes
    inside = _intra(cluster, g, (g - 1) / g, nbytes, g - 1)
    across = _inter(cluster, k, (k - 1) / k, nbytes / g, k - 1)
    return inside + across


def all_to_all(cluster: ClusterSpec, group: Group, nbytes: float) -> float:
    """All-to-all where each rank sends ``nbytes`` in total, (n−1)/n of it to others (pairwise).

    Bytes for peers in other nodes leave over the GPU's own NIC; the slower level bounds the time.
    """
    n, g = group.size, group.per_node
    if n <= 1 or nbytes <= 0:
        return 0.0
    inside = _intra(cluster, g, (g - 1) / n, nbytes, g - 1) if g > 1 else 0.0
    across = _inter(cluster, 2, (n - g) / n, nbytes, n - g) if n > g else 0.0
    return max(inside, across)


def send_recv(cluster: ClusterSpec, nbytes: float, across_nodes: bool) -> float:
    """Point-to-point transfer of ``nbytes`` (pipeline activations): α + S/(B·η)."""
    if nbytes <= 0:
        return 0.0
    if across_nodes:
        return _inter(cluster, 2, 1.0, nbytes, 1)
    return _intra(cluster, 2, 1.0, nbytes, 1)
