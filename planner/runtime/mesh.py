"""The DeviceMesh of a plan, in the plan's rank order.

``Mesh.rank_order`` is ``tp-cp-ep-dp-pp``, fastest-varying first (Megatron-LM ``parallel_state``):
global rank = tp_rank + tp x (cp_rank + cp x (dp_rank + dp x pp_rank)). The mesh is therefore
``init_device_mesh(device, (pp, dp_replicate, dp_shard, cp, tp))`` (slowest first), with the data
dimension split in two as torchtitan does: ``dp_shard`` carries FSDP2 sharding (ZeRO 1-3) and
``dp_replicate`` plain replication (ZeRO 0, FSDP2's HSDP with one shard). One of the two is 1.
Under context parallelism FSDP2 takes the ``dp x cp`` ranks instead (:func:`_data_mesh`), so that
gradients average over both.

With expert parallelism (``ep > 1``, which divides ``dp x cp``) the combined data / context index
``cp_rank + cp x dp_rank`` splits as ``ep_rank + ep x edp_rank`` (ep faster, Megatron-LM's expert
group carved out of dp x cp), and a second
mesh over the same ranks, ``(rest, ep, edp_replicate, edp_shard)``, gives the EP group (``ep``: ranks
with the same pp, tp and expert-data-parallel coordinates) and the expert-data-parallel mesh of
the ``dp x cp / ep`` ranks holding the same experts (``edp_*``, split as the dense data dimension is),
torchtitan's separate mesh for experts (``dp_mod_ep`` in ``torchtitan/distributed/parallel_dims.py``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from planner.errors import InputError
from planner.plans.schema import Plan

DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "tp")
EXPERT_DIMS = ("rest", "ep", "edp_replicate", "edp_shard")
CP_DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "cp_unit", "tp")
"""The plan mesh's dimensions under context parallelism (:func:`_data_mesh`)."""


@dataclass(frozen=True)
class PlanMesh:
    """The world mesh and this rank's coordinates."""

    mesh: DeviceMesh
    pp: int
    dp: int
    cp: int
    tp: int
    ep: int = 1
    expert_mesh: DeviceMesh | None = None
    """The :data:`EXPERT_DIMS` mesh when ``ep > 1``."""
    data_mesh: DeviceMesh | None = None
    """The (replicate, shard) mesh of the ``dp x cp`` ranks when ``cp > 1`` (:func:`_data_mesh`)."""

    def coordinate(self, dim: str) -> int:
        """This rank's index along ``dim`` (one of :data:`DIMS`, or ``dp``)."""
        if dim == "dp":
            return self.mesh["dp_replicate"].get_local_rank() * self.mesh["dp_shard"].size() + self.mesh["dp_shard"].get_local_rank()
        return self.mesh[dim].get_local_rank()

    def dp_mesh(self) -> DeviceMesh:
        """The 2-D (replicate, shard) mesh FSDP2 takes: the data-parallel ranks, times cp under context
        parallelism (:func:`_data_mesh`)."""
        return self.data_mesh if self.data_mesh is not None else self.mesh["dp_replicate", "dp_shard"]

    def ep_rank(self) -> int:
        """This rank's index in its EP group (0 without expert parallelism)."""
        return (self.coordinate("cp") + self.cp * self.coordinate("dp")) % self.ep

    def ep_group(self) -> object:
        """The EP group's process group (None without expert parallelism)."""
        return None if self.expert_mesh is None else self.expert_mesh["ep"].get_group()

    def expert_dp_mesh(self) -> DeviceMesh | None:
        """The 2-D (replicate, shard) expert-data-parallel mesh FSDP2 shards experts over (None without EP)."""
        return None if self.expert_mesh is None else self.expert_mesh["edp_replicate", "edp_shard"]


def build_mesh(plan: Plan, device_type: str, world_size: int) -> PlanMesh:
    """``init_device_mesh`` with the plan's degrees; InputError when the world does not match."""
    m = plan.mesh
    if m.rank_order != "tp-cp-ep-dp-pp":
        raise InputError(f"plan rank order {m.rank_order!r} is not tp-cp-ep-dp-pp; regenerate the plan with this meshplan")
    product = m.pp * m.dp * m.cp * m.tp
    if product != world_size:
        raise InputError(f"plan needs pp {m.pp} x dp {m.dp} x cp {m.cp} x tp {m.tp} = {product} processes, "
                         f"the world has {world_size}; launch with --nproc-per-node {product} (or plan for {world_size} GPUs)")
    if (m.dp * m.cp) % m.ep:
        raise InputError(f"plan has ep {m.ep}, which does not divide dp {m.dp} x cp {m.cp}; regenerate the plan")
    replicate, shard = (m.dp, 1) if m.zero == 0 else (1, m.dp)
    if m.cp > 1:  # a unit dimension after cp: the shard dimension of the dp x cp mesh under ZeRO 0
        mesh = init_device_mesh(device_type, (m.pp, replicate, shard, m.cp, 1, m.tp), mesh_dim_names=CP_DIMS)
    else:
        mesh = init_device_mesh(device_type, (m.pp, replicate, shard, m.cp, m.tp), mesh_dim_names=DIMS)
    experts = _expert_mesh(device_type, m.pp, m.dp, m.cp, m.tp, m.ep, m.zero) if m.ep > 1 else None
    data = _data_mesh(mesh, m.zero) if m.cp > 1 else None
    return PlanMesh(mesh=mesh, pp=m.pp, dp=m.dp, cp=m.cp, tp=m.tp, ep=m.ep, expert_mesh=experts, data_mesh=data)


def _data_mesh(mesh: DeviceMesh, zero: int) -> DeviceMesh:
    """The 2-D (replicate, shard) mesh of the ``dp x cp`` ranks, flattened out of the plan's mesh
    (so that FSDP2 can join it to the tp mesh): ``(dp_replicate, dp_shard x cp)`` when parameters are
    sharded, ``(dp_replicate x dp_shard x cp, cp_unit)`` under ZeRO 0. Parameters, gradients and
    optimizer states shard over dp x cp and gradients average over it, torchtitan's ``dp_shard_cp``
    (``ParallelDims``) and Megatron-LM's data-parallel group with context parallelism (``parallel_state``)."""
    with warnings.catch_warnings():  # torch 2.13 warns that slicing a flattened dim will change
        warnings.simplefilter("ignore", UserWarning)
        if zero == 0:
            mesh["dp_replicate", "dp_shard", "cp"]._flatten("dcp_replicate")
            return mesh["dcp_replicate", "cp_unit"]
        mesh["dp_shard", "cp"]._flatten("dcp_shard")
        return mesh["dp_replicate", "dcp_shard"]


def _expert_mesh(device_type: str, pp: int, dp: int, cp: int, tp: int, ep: int, zero: int) -> DeviceMesh:
    """The :data:`EXPERT_DIMS` mesh: global ranks ``(pp, edp, ep, tp)`` (slowest first; ``edp x ep`` is the
    combined dp x cp index of the module docstring) rearranged so that ep and edp are the last dimensions."""
    edp = dp * cp // ep
    ranks = torch.arange(pp * dp * cp * tp).reshape(pp, edp, ep, tp).permute(0, 3, 2, 1)
    replicate, shard = (edp, 1) if zero == 0 else (1, edp)
    return DeviceMesh(device_type, ranks.reshape(pp * tp, ep, replicate, shard), mesh_dim_names=EXPERT_DIMS)
