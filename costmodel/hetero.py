"""Heterogeneous and degraded clusters: GPU groups, the links between them, and per-GPU speeds.

A :class:`HeteroCluster` is an ordered list of :class:`ClusterGroup` (each a homogeneous
:class:`~costmodel.specs.ClusterSpec` with a GPU count, per-GPU speeds and nodes that are down) and
the :class:`GroupLink` between groups. GPUs and nodes are numbered across the whole cluster, group
after group in order (group 0's GPUs first). A one-group cluster with every speed 1 and no node down
is exactly its ``ClusterSpec``: the cost model and the homogeneous search never see this type.

Speed assumption (stated once, here; :func:`scale_cluster` applies it): a GPU at speed ``s`` runs
every rate-bound term at ``s`` times its nominal rate: tensor-core peaks and HBM bandwidth (its
compute), and its NVLink and network bandwidth (its links). A throttled GPU also issues and reduces
its NCCL chunks at its clock, and a collective is as fast as its slowest member, so a slow GPU
slows the collectives it is part of as much as its kernels (Malleus, SIGMOD'25, §3 models a
straggler the same way: one slowdown factor per GPU). Latencies, launch overheads, the step's
fixed host time and memory capacity are unchanged.

Pure: no I/O, no globals, no printing; the loaders are in ``profiles.groups``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from costmodel.specs import ClusterSpec

_FROZEN = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class GroupLink(BaseModel):
    """The link between two groups, per GPU and unidirectional (what a collective spanning both sees)."""

    model_config = _FROZEN
    groups: tuple[int, int]
    """Indices of the two groups it joins (order-free)."""
    bandwidth_gbps: float = Field(gt=0)
    """Unidirectional bandwidth per GPU between the groups, GB/s."""
    latency_us: float = Field(gt=0)
    """Per-hop latency between the groups, microseconds."""


class ClusterGroup(BaseModel):
    """A homogeneous part of a cluster: ``gpus`` GPUs of one node preset, some maybe slow or down."""

    model_config = _FROZEN
    cluster: ClusterSpec
    gpus: int = Field(gt=0)
    """GPUs of this group, a whole number of nodes (down nodes included)."""
    speeds: tuple[float, ...] = ()
    """Speed of each GPU in (0, 1] (``()``: all 1); see the module's speed assumption."""
    down_nodes: tuple[int, ...] = ()
    """Nodes of this group that are gone, numbered from 0 inside the group."""

    @model_validator(mode="after")
    def _shape(self) -> ClusterGroup:
        """Whole nodes, one speed per GPU, speeds in (0, 1], down nodes inside the group."""
        gpn = self.cluster.gpus_per_node
        if self.gpus % gpn:
            raise ValueError(f"{self.gpus} GPUs of {self.cluster.name} is not a whole number of {gpn}-GPU nodes")
        if self.speeds and len(self.speeds) != self.gpus:
            raise ValueError(f"{len(self.speeds)} speeds for {self.gpus} GPUs of {self.cluster.name}")
        if any(not 0 < s <= 1 for s in self.speeds):
            raise ValueError(f"speeds must lie in (0, 1], got {min(self.speeds)}")
        if any(not 0 <= n < self.nodes for n in self.down_nodes):
            raise ValueError(f"down node past the {self.nodes} nodes of {self.cluster.name}")
        return self

    @property
    def nodes(self) -> int:
        return self.gpus // self.cluster.gpus_per_node

    def speed(self, gpu: int) -> float:
        """Speed of the group's GPU ``gpu`` (numbered inside the group)."""
        return self.speeds[gpu] if self.speeds else 1.0

    def alive_nodes(self) -> list[int]:
        """Nodes of the group that are up, in order."""
        return [n for n in range(self.nodes) if n not in self.down_nodes]


class HeteroCluster(BaseModel):
    """GPU groups in order, and the links between them (default: :func:`default_link`)."""

    model_config = _FROZEN
    name: str
    groups: tuple[ClusterGroup, ...] = Field(min_length=1)
    links: tuple[GroupLink, ...] = ()
    """Stated links between pairs of groups; a pair without one gets :func:`default_link`."""

    @property
    def gpus(self) -> int:
        """Every GPU of the cluster, down ones included (the numbering's range)."""
        return sum(g.gpus for g in self.groups)

    @property
    def is_homogeneous(self) -> bool:
        """One group, every GPU at full speed, no node down: exactly ``groups[0].cluster``."""
        g = self.groups[0]
        return len(self.groups) == 1 and not g.down_nodes and all(s == 1.0 for s in g.speeds)

    def first_gpu(self, group: int) -> int:
        """Cluster-wide index of the first GPU of ``group``."""
        return sum(g.gpus for g in self.groups[:group])

    def first_node(self, group: int) -> int:
        """Cluster-wide index of the first node of ``group``."""
        return sum(g.nodes for g in self.groups[:group])

    def link(self, a: int, b: int) -> GroupLink:
        """The link between groups ``a`` and ``b`` (stated, else :func:`default_link`)."""
        for link in self.links:
            if set(link.groups) == {a, b}:
                return link
        return default_link(self.groups[a].cluster, self.groups[b].cluster, (a, b))


def default_link(a: ClusterSpec, b: ClusterSpec, groups: tuple[int, int]) -> GroupLink:
    """Two groups joined by the slower group's network: the lower per-GPU network bandwidth and the
    higher latency (a GPU's NIC is its only way out of its node; issue 22's default)."""
    return GroupLink(groups=groups, bandwidth_gbps=min(a.network_bandwidth_gbps, b.network_bandwidth_gbps),
                     latency_us=max(a.network_latency_us, b.network_latency_us))


def scale_cluster(cluster: ClusterSpec, speed: float) -> ClusterSpec:
    """``cluster`` as seen by a GPU at ``speed``: peaks, HBM, NVLink and network bandwidth times
    ``speed`` (the module's speed assumption); ``speed == 1`` returns ``cluster`` itself."""
    if speed == 1.0:
        return cluster
    gpu = cluster.gpu
    scaled = gpu.model_copy(update={
        "name": f"{gpu.name}@{speed:g}",
        "peak_bf16_tflops": gpu.peak_bf16_tflops * speed,
        "peak_fp8_tflops": gpu.peak_fp8_tflops * speed if gpu.peak_fp8_tflops else None,
        "hbm_bandwidth_gbps": gpu.hbm_bandwidth_gbps * speed,
    })
    return cluster.model_copy(update={
        "name": f"{cluster.name}@{speed:g}", "gpu": scaled,
        "intra_node_bandwidth_gbps": cluster.intra_node_bandwidth_gbps * speed,
        "network_bandwidth_gbps": cluster.network_bandwidth_gbps * speed,
    })


def across_links(cluster: ClusterSpec, links: Sequence[GroupLink]) -> ClusterSpec:
    """``cluster`` with its network priced as the slowest of ``links`` (a data-parallel ring or a
    pipeline hop that spans groups runs at its slowest link: ring all-reduce time is set by its
    slowest hop, Patarasuk & Yuan 2009); unchanged when ``links`` is empty or all are faster."""
    if not links:
        return cluster
    bandwidth = min(cluster.network_bandwidth_gbps, *(link.bandwidth_gbps for link in links))
    latency = max(cluster.network_latency_us, *(link.latency_us for link in links))
    if bandwidth == cluster.network_bandwidth_gbps and latency == cluster.network_latency_us:
        return cluster
    return cluster.model_copy(update={"name": f"{cluster.name}+link", "network_bandwidth_gbps": bandwidth,
                                      "network_latency_us": latency})


def gradient_weights(micro_batches: Sequence[int]) -> tuple[float, ...]:
    """Weight of each replica's gradient under uneven data-parallel shares.

    Replica r runs ``m_r`` micro-batches and, as every engine does, averages its loss over them, so
    its gradient is ``g_r = (1/m_r) Σ_i ∇ℓ_i``. The data-parallel all-reduce takes the mean over the
    D replicas; scaling ``g_r`` by ``w_r = D·m_r / M`` (M = Σ m_r) before it gives
    ``(1/D) Σ_r w_r g_r = (1/M) Σ_all ∇ℓ_i``: exactly the update of the uniform global batch
    (equal micro-batch sizes assumed; with equal shares every weight is 1)."""
    total, replicas = sum(micro_batches), len(micro_batches)
    if total <= 0 or any(m <= 0 for m in micro_batches):
        raise ValueError(f"every replica needs at least one micro-batch, got {list(micro_batches)}")
    return tuple(replicas * m / total for m in micro_batches)
