"""Collective communication time over a two-level topology (NVLink inside a node, network across).

Model: time = hops·α + factor·S / (B·η) (Hockney α–β; Thakur, Rabenseifner & Gropp, IJHPCA 2005),
with the nccl-tests bus-bandwidth factors (NVIDIA/nccl-tests doc/PERFORMANCE.md): all-reduce
2(n−1)/n, all-gather / reduce-scatter / all-to-all (n−1)/n. A group that spans nodes runs the
hierarchical algorithm of costmodel-notes 2.6.2: reduce-scatter inside the node, the cross-node step on
S/g bytes over every GPU's own NIC, all-gather inside the node. ``B`` is the unidirectional per-GPU
bandwidth and ``η`` the achieved busbw fraction from the cluster's efficiency spec. Like NCCL, every
collective runs with the fastest of the LL, LL128 and Simple protocols (:data:`PROTOCOLS`): LL's low
latency wins for small messages over many ranks, Simple's full bandwidth for large ones.
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


PROTOCOLS: tuple[tuple[float, float, float, float], ...] = (
    (0.6 / 1.9, 2.7 / 4.0, 6.6, 0.25),
    (1.0, 1.0, 14.0, 0.92),
    (3.4 / 1.9, 14.0 / 4.0, 8.4, 1.0),
)
"""NCCL's three protocols, LL, LL128 and Simple, as (NVLink hop latency, network hop latency, both
relative to LL128's, base latency µs, bandwidth fraction). NVIDIA/nccl ``src/graph/tuning.cc``
(costmodel-notes 2.6.3): ring hop latency NVLink {0.6, 1.9, 3.4} µs, network {2.7, 4.0, 14.0} µs,
base {6.6, 14, 8.4} µs; LL moves 8 bytes of data per 16 (flags), ≈ ¼ of the bus bandwidth, LL128 120
of every 128 bytes (0.92). A cluster's ``intra_node_latency_us`` / ``network_latency_us`` are its
LL128 hop latencies; the other protocols scale with them. NCCL runs each collective with the protocol
its model predicts fastest: small, many-rank collectives pick LL (latency), large ones Simple."""


@dataclass(frozen=True)
class Cost:
    """A collective's time as NCCL models it: per protocol, latency + bytes · seconds per byte, and
    the fastest protocol wins (a concave, piecewise-linear function of the bytes)."""

    terms: tuple[tuple[float, float], ...]
    """(latency s, seconds per byte) of each protocol."""

    def __call__(self, nbytes: float) -> float:
        if nbytes <= 0 or not self.terms:
            return 0.0
        best = float("inf")
        for latency, per_byte in self.terms:
            seconds = latency + per_byte * nbytes
            if seconds < best:
                best = seconds
        return best

    def scaled(self, factor: float) -> Cost:
        """The same collective run ``factor`` times back to back (latency and bytes both scale)."""
        return Cost(tuple((factor * a, factor * b) for a, b in self.terms))


def _link_seconds(cluster: ClusterSpec, nbytes: float, across_nodes: bool) -> float:
    """S/(B·η) over one GPU's NVLink or NIC."""
    if across_nodes:
        return nbytes / (cluster.network_bandwidth_gbps * 1e9 * cluster.efficiency.network)
    return nbytes / (cluster.intra_node_bandwidth_gbps * 1e9 * cluster.efficiency.intra_node)


def ring_latency(cluster: ClusterSpec, group: Group, protocol: int = 1, passes: int = 1) -> float:
    """Latency of ``passes`` ring passes of n − 1 steps each, of which k − 1 cross the network, plus
    NCCL's base latency once (NVIDIA/nccl ``src/graph/tuning.cc``: baseLat + (nsteps −
    nInterSteps)·intraLat + nInterSteps·interLat). ``protocol`` indexes :data:`PROTOCOLS` (LL128)."""
    intra, inter, base, _ = PROTOCOLS[protocol]
    n, k = group.size, group.nodes
    hops = (n - k) * intra * cluster.intra_node_latency_us + (k - 1) * inter * cluster.network_latency_us
    return (base + passes * hops) * 1e-6


def ring_cost(cluster: ClusterSpec, group: Group, passes: int = 1) -> Cost:
    """``passes`` ring passes (1: reduce-scatter or all-gather, 2: all-reduce) of a buffer over
    ``group``. Bandwidth term of the hierarchical algorithm (costmodel-notes 2.6.2): (g−1)/g·S over
    NVLink and (k−1)/k·S/g over each GPU's NIC (nccl-tests bus-bandwidth factor (n−1)/n per pass);
    latency per :func:`ring_latency`, for each NCCL protocol."""
    if group.size <= 1:
        return Cost(())
    g, k = group.per_node, group.nodes
    per_byte = (g - 1) / g * _link_seconds(cluster, 1.0, False) + (k - 1) / k * _link_seconds(cluster, 1.0 / g, True)
    return Cost(tuple(
        (ring_latency(cluster, group, p, passes), passes * per_byte / PROTOCOLS[p][3]) for p in range(len(PROTOCOLS))
    ))


def reduce_scatter(cluster: ClusterSpec, group: Group, nbytes: float, messages: float = 1) -> float:
    """Reduce-scatter of an ``nbytes`` buffer (each rank keeps nbytes/n): (n−1)/n·S/B, in ``messages``
    collectives of nbytes/messages each."""
    return messages * ring_cost(cluster, group)(nbytes / messages)


def all_gather(cluster: ClusterSpec, group: Group, nbytes: float, messages: float = 1) -> float:
    """All-gather into an ``nbytes`` buffer (each rank contributes nbytes/n): (n−1)/n·S/B."""
    return messages * ring_cost(cluster, group)(nbytes / messages)


def all_reduce(cluster: ClusterSpec, group: Group, nbytes: float, messages: float = 1) -> float:
    """All-reduce of ``nbytes``: a reduce-scatter then an all-gather (ring; 2(n−1)/n·S/B)."""
    return messages * ring_cost(cluster, group, 2)(nbytes / messages)


def all_to_all(cluster: ClusterSpec, group: Group, nbytes: float) -> float:
    """All-to-all where each rank sends ``nbytes`` in total, (n−1)/n of it to others (pairwise, n − 1
    steps). Bytes for peers in other nodes leave over the GPU's own NIC, the rest over NVLink; the
    slower of the two bounds the time. Latency: one hop per peer (Simple protocol's, the bulk
    transfers of token dispatch)."""
    n, g = group.size, group.per_node
    if n <= 1 or nbytes <= 0:
        return 0.0
    inside = (g - 1) / n * _link_seconds(cluster, nbytes, False)
    across = (n - g) / n * _link_seconds(cluster, nbytes, True)
    intra, inter, base, _ = PROTOCOLS[2]
    hops = (g - 1) * intra * cluster.intra_node_latency_us + (n - g) * inter * cluster.network_latency_us
    return (base + hops) * 1e-6 + max(inside, across)


def send_recv(cluster: ClusterSpec, nbytes: float, across_nodes: bool) -> float:
    """Point-to-point transfer of ``nbytes`` (pipeline activations, ring-attention chunks): one hop,
    α + S/(B·η), with the fastest NCCL protocol."""
    if nbytes <= 0:
        return 0.0
    hop = cluster.network_latency_us if across_nodes else cluster.intra_node_latency_us
    seconds = _link_seconds(cluster, nbytes, across_nodes)
    return min(
        (base + hop * (inter if across_nodes else intra)) * 1e-6 + seconds / bw for intra, inter, base, bw in PROTOCOLS
    )
