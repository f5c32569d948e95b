"""The DeviceMesh of a plan, in the plan's rank order.

``Mesh.rank_order`` is ``tp-cp-ep-dp-pp``, fastest-varying first (Megatron-LM ``parallel_state``):
global rank = tp_rank + tp x (cp_rank + cp x (dp_rank + dp x pp_rank)). The mesh is therefore
``init_device_mesh(device, (pp, dp_replicate, dp_shard, cp, tp))`` (slowest first), with the data
dimension split in two as torchtitan does: ``dp_shard`` carries FSDP2 sharding (ZeRO 1-3) and
``dp_replicate`` plain replication (ZeRO 0, FSDP2's HSDP with one shard). One of the two is 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from planner.errors import InputError
from planner.plans.schema import Plan

DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "tp")


@dataclass(frozen=True)
class PlanMesh:
    """The world mesh and this rank's coordinates."""

    mesh: DeviceMesh
    pp: int
    dp: int
    cp: int
    tp: int

    def coordinate(self, dim: str) -> int:
        """This rank's index along ``dim`` (one of :data:`DIMS`, or ``dp``)."""
        if dim == "dp":
            return self.mesh["dp_replicate"].get_local_rank() * self.mesh["dp_shard"].size() + self.mesh["dp_shard"].get_local_rank()
        return self.mesh[dim].get_local_rank()

    def dp_mesh(self) -> DeviceMesh:
        """The 2-D (replicate, shard) data-parallel mesh FSDP2 takes."""
        return self.mesh["dp_replicate", "dp_shard"]


def build_mesh(plan: Plan, device_type: str, world_size: int) -> PlanMesh:
    """``init_device_mesh`` with the plan's degrees; InputError when the world does not match."""
    m = plan.mesh
    if m.rank_order != "tp-cp-ep-dp-pp":
        raise InputError(f"plan rank order {m.rank_order!r} is not tp-cp-ep-dp-pp; regenerate the plan with this meshplan")
    product = m.pp * m.dp * m.cp * m.tp
    if product != world_size:
        raise InputError(f"plan needs pp {m.pp} x dp {m.dp} x cp {m.cp} x tp {m.tp} = {product} processes, "
                         f"the world has {world_size}; launch with --nproc-per-node {product} (or plan for {world_size} GPUs)")
    if m.ep != 1:
        raise InputError(f"plan uses expert parallelism ep {m.ep}; the native runtime runs dense models only (plan with ep 1)")
    replicate, shard = (m.dp, 1) if m.zero == 0 else (1, m.dp)
    mesh = init_device_mesh(device_type, (m.pp, replicate, shard, m.cp, m.tp), mesh_dim_names=DIMS)
    return PlanMesh(mesh=mesh, pp=m.pp, dp=m.dp, cp=m.cp, tp=m.tp)
