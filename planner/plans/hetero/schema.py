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


class HeteroBaselineInfo(BaseModel):
    """A homogeneous alternative to the plan (``search.hetero.baselines``) and the plan's gain over it."""

    model_config = _PLAN
    name: Literal["fastest-group", "all-as-slowest", "straggler-blind", "healthy-only"]
    """fastest-group: the fastest GPU type's group alone; all-as-slowest: every GPU that is up planned as
    the slowest type; straggler-blind: the best uniform plan of the GPUs that are up, run on the
    degraded cluster with equal shares; healthy-only: the homogeneous plan of the healthy nodes only."""
    label: str
    """What it is, for a person (e.g. "16 x dgx-h100 alone")."""
    gpus: int
    step_time_s: float | None
    """Its best plan's predicted step (None: no plan fits)."""
    speedup: float | None
    """Its step over this plan's (above 1: the heterogeneous plan is faster)."""
    plan_summary: str | None
    """Its best plan's configuration in one line."""
    search_status: str
    """The homogeneous search's status (optimal, feasible, timeout) or "no plan fits"."""


class HeteroInfo(BaseModel):
    """The heterogeneous plan: the cluster as planned and every replica."""

    model_config = _PLAN
    cluster: HeteroCluster
    """Groups in order (GPU and node numbering is cluster-wide, group after group), speeds, down nodes, links."""
    gpus_used: int
    """GPUs the replicas occupy (the others are down, or left out because they would slow the job)."""
    replicas: list[HeteroReplicaInfo]
    baselines: list[HeteroBaselineInfo] | None = None
    """The homogeneous alternatives and the plan's gain over each (None in plans made before they were recorded)."""
