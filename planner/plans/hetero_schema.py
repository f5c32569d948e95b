"""The plan JSON's heterogeneous section (issue 22): which GPU group runs each stage and replica.

A plan made for a mixed or degraded cluster (several GPU groups, slow GPUs, lost nodes) carries a
``hetero`` section: the cluster as planned (groups, speeds, down nodes, links) and every data-parallel
replica with its stages (GPU group, speed, devices, layers) and its share of the batch
(micro-batches) and gradient weight. Homogeneous plans have no such section, and their JSON is
byte-identical to what it was before the section existed (``Plan.to_json`` leaves it out).

Plain data: it imports only ``costmodel`` types (the bottom of the dependency graph).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from costmodel.hetero import HeteroCluster

_PLAN = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class HeteroStageInfo(BaseModel):
    """One pipeline stage of one replica, on one GPU group."""

    model_config = _PLAN
    group: int
    """Index of the cluster group its GPUs belong to (``hetero.cluster.groups``)."""
    gpu_cluster: str
    """That group's cluster name (its GPU type and node)."""
    speed: float
    """Slowest speed of its GPUs in (0, 1] (what the stage runs at)."""
    layers: list[int]
    """Indices into the model's ordered layer list."""
    devices: list[int]
    """Cluster-wide GPU indices (tp of them, one node of one group)."""
    time_per_microbatch_s: float
    memory_gib: float
    """Peak memory of the stage's GPUs, as the cost model estimates it."""
    capacity_gib: float
    """Memory of the stage's GPU type."""


class HeteroReplicaInfo(BaseModel):
    """One data-parallel replica: its stages, its share of the batch and its gradient weight."""

    model_config = _PLAN
    index: int
    micro_batches: int
    """Micro-batches this replica runs per step (its data-parallel share)."""
    share: float
    """Fraction of the global batch (micro_batches / all micro-batches)."""
    grad_weight: float
    """Factor on its averaged gradient before the mean all-reduce (``costmodel.hetero.gradient_weights``):
    the update equals the uniform-batch update."""
    recompute: Literal["none", "selective", "full"]
    step_time_s: float
    """This replica's step for its share, gradient sync and optimizer included."""
    stages: list[HeteroStageInfo]


class HeteroInfo(BaseModel):
    """The heterogeneous plan: the cluster as planned and every replica."""

    model_config = _PLAN
    cluster: HeteroCluster
    """Groups in order (GPU and node numbering is cluster-wide, group after group), speeds, down nodes, links."""
    gpus_used: int
    """GPUs the replicas occupy (the others are down, or left out because they would slow the job)."""
    replicas: list[HeteroReplicaInfo]
