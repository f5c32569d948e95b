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
from typing import Union

import numpy as np

from costmodel.specs import ClusterSpec

Num = Union[float, np.ndarray]
"""A byte count or time: a float, or a numpy array of them (one per pipeline rank)."""


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


def _seconds(nbytes: Num, bandwidth_s: Num, latency_s: float) -> Num:
    """Latency plus bandwidth time, zero for empty messages (``nbytes`` float or array)."""
    if isinstance(nbytes, np.ndarray):
        return np.where(nbytes > 0, latency_s + bandwidth_s, 0.0)
    return latency_s + bandwidth_s if nbytes > 0 else 0.0


def _link_seconds(cluster: ClusterSpec, nbytes: Num, across_nodes: bool) -> Num:
    """S/(B·η) over one GPU's NVLink or NIC."""
    if across_nodes:
        return nbytes / (cluster.network_bandwidth_gbps * 1e9 * cluster.efficiency.network)
    return nbytes / (cluster.intra_node_bandwidth_gbps * 1e9 * cluster.efficiency.intra_node)


def ring_latency(cluster: ClusterSpec, group: Group) -> float:
    """Latency of one ring pass: n − 1 steps, of which k − 1 cross the network (NVIDIA/nccl
    ``src/graph/tuning.cc``: (nsteps − nInterSteps)·intraLat + nInterSteps·interLat)."""
    n, k = group.size, group.nodes
    return ((n - k) * cluster.intra_node_latency_us + (k - 1) * cluster.network_latency_us) * 1e-6


def _one_pass(cluster: ClusterSpec, group: Group, nbytes: Num, messages: float) -> Num:
    """One ring pass (RS or AG) of ``nbytes`` split into ``messages`` collectives: the bandwidth term
    of the hierarchical algorithm (costmodel-notes 2.6.2: (g−1)/g·S over NVLink, (k−1)/k·S/g over
    each GPU's NIC) and the ring latency once per message."""
    g, k = group.per_node, group.nodes
    if group.size <= 1:
        return 0.0 * nbytes
    bandwidth = (g - 1) / g * _link_seconds(cluster, nbytes, False)
    bandwidth = bandwidth + (k - 1) / k * _link_seconds(cluster, nbytes / g, True)
    return _seconds(nbytes, bandwidth, messages * ring_latency(cluster, group))


def affine(cluster: ClusterSpec, group: Group, passes: int) -> tuple[float, float]:
    """(latency s, seconds per byte) of ``passes`` ring passes (1: RS or AG, 2: all-reduce) over
    ``group``: the same model as :func:`all_reduce` and friends, as coefficients for array math."""
    if group.size <= 1:
        return 0.0, 0.0
    g, k = group.per_node, group.nodes
    per_byte = (g - 1) / g * _link_seconds(cluster, 1.0, False) + (k - 1) / k * _link_seconds(cluster, 1.0 / g, True)
    return passes * ring_latency(cluster, group), passes * per_byte


def reduce_scatter(cluster: ClusterSpec, group: Group, nbytes: Num, messages: float = 1) -> Num:
    """Reduce-scatter of an ``nbytes`` buffer (each rank keeps nbytes/n): (n−1)/n·S/B."""
    return _one_pass(cluster, group, nbytes, messages)


def all_gather(cluster: ClusterSpec, group: Group, nbytes: Num, messages: float = 1) -> Num:
    """All-gather into an ``nbytes`` buffer (each rank contributes nbytes/n): (n−1)/n·S/B."""
    return _one_pass(cluster, group, nbytes, messages)


def all_reduce(cluster: ClusterSpec, group: Group, nbytes: Num, messages: float = 1) -> Num:
    """All-reduce of ``nbytes``: a reduce-scatter then an all-gather (ring; 2(n−1)/n·S/B)."""
    return 2.0 * _one_pass(cluster, group, nbytes, messages)


def all_to_all(cluster: ClusterSpec, group: Group, nbytes: Num) -> Num:
    """All-to-all where each rank sends ``nbytes`` in total, (n−1)/n of it to others (pairwise, n − 1
    steps). Bytes for peers in other nodes leave over the GPU's own NIC, the rest over NVLink; the
    slower of the two bounds the time."""
    n, g = group.size, group.per_node
    if n <= 1:
        return 0.0 * nbytes
    inside = (g - 1) / n * _link_seconds(cluster, nbytes, False)
    across = (n - g) / n * _link_seconds(cluster, nbytes, True)
    slower = np.maximum(inside, across) if isinstance(nbytes, np.ndarray) else max(inside, across)
    latency = ((g - 1) * cluster.intra_node_latency_us + (n - g) * cluster.network_latency_us) * 1e-6
    return _seconds(nbytes, slower, latency)


def send_recv(cluster: ClusterSpec, nbytes: Num, across_nodes: bool) -> Num:
    """Point-to-point transfer of ``nbytes`` (pipeline activations, ring-attention chunks): α + S/(B·η)."""
    latency = cluster.network_latency_us if across_nodes else cluster.intra_node_latency_us
    return _seconds(nbytes, _link_seconds(cluster, nbytes, across_nodes), latency * 1e-6)
