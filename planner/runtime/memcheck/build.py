"""One pipeline rank of a plan, built for the memory check: fake process group, fake tensors.

For a pipeline rank ``r`` of a plan on ``N = dp x tp x pp x cp`` GPUs, :func:`start_fake_world`
starts torch's fake process group (``torch.testing._internal.distributed.fake_pg``, backend
``fake``: every collective returns at once, nothing is sent) of size ``N``; :func:`build_rank`
builds the model on ``meta``
(:func:`planner.runtime.models.build_model`) and applies the plan with the runtime's own parts
(:mod:`planner.runtime`): the plan's DeviceMesh (``mesh.build_mesh``), the layer map
(``layers.map_layers``), this rank's chunks with their per-layer recomputation
(``stage.build_stages``), DTensor tensor / sequence parallelism (``tensor_parallel``), this rank's
experts under expert parallelism (``expert_parallel``, tokens routed evenly over the EP group: fake
tensors carry no router decisions, and the cost model counts balanced routing too), then FSDP2
as ``planner.runtime.fsdp`` does (one unit per layer, the chunk as root, ZeRO 3 resharding after
forward, ZeRO 0-2 keeping the gathered parameters to backward, ZeRO 0 as HSDP replication) but
with the plan's precision: ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``
when the plan computes in 2-byte parameters with 4-byte gradient reduction (the cost model's
default, torchtitan's default), applied on a one-rank mesh too when ``dp == 1`` so that the
compute runs in bf16 there as well: the precision ``planner.apply`` trains with by default
(``planner.runtime.precision``).

Parameters are materialised under ``FakeTensorMode`` (``to_empty``): fake tensors carry shapes,
dtypes and storages but no memory, so a 70B model on 64 ranks builds in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from planner.plans.schema import Plan

FAKE_DEVICE = torch.device("cpu")
"""Device of the fake tensors; the tracker counts bytes the same on every device (CUDA rounds each
block to 512 bytes, which is below the check's resolution)."""


@dataclass
class RankBuild:
    """This pipeline rank's modules, ready to train on fake tensors."""

    pp_rank: int
    chunks: list[int]
    """Plan chunk index of each local stage."""
    stages: list[nn.Module]
    """Local chunk modules (``planner.runtime.stage.StageModule``), materialised as fake tensors."""
    loss_parallel: bool
    """The loss is torch's vocab-parallel cross-entropy (``loss_parallel``): tp > 1, as ``planner.apply``."""
    tp_mesh: object | None
    """The tp sub-mesh (None without TP): a pipeline's last stage hands its local vocabulary shard of
    the logits to the loss, which wraps it back into a ``Shard(-1)`` DTensor (``planner.runtime.apply``)."""
    sp_shards: int
    """Sequence shards of the hidden state between layers (tp under sequence parallelism)."""
    mixed_precision: bool
    cp: int = 1
    """Context-parallel degree: the rank holds ``seq / cp`` tokens and gathers K/V over ``cp_group``."""
    cp_group: object | None = None


def start_fake_world(plan: Plan) -> None:
    """(Re)initialise the default process group as the fake backend of the plan's world size.

    The process is global rank 0 whichever pipeline rank it measures: a rank's memory depends on
    its chunks and its schedule (:func:`build_rank` and ``memcheck_step`` take the pipeline rank
    as an argument), not on its coordinates, since every TP / FSDP group has the same size and
    shards evenly (and torch 2.13's fake backend cannot resolve the sub-groups DeviceMesh builds
    for a non-zero rank of a multi-dimensional mesh)."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    m = plan.mesh
    if dist.is_initialized():
        dist.destroy_process_group()
    _forget_old_meshes()
    dist.init_process_group("fake", rank=0, world_size=m.dp * m.tp * m.pp * m.cp, store=FakeStore())


def _forget_old_meshes() -> None:
    """Clear DTensor's sharding-propagation caches (C++ and Python) and its redistribution cache. A ``DeviceMesh`` compares equal
    to any mesh of the same shape and names whatever its process groups (``DeviceMesh.__eq__``,
    torch/distributed/device_mesh.py), so results cached in an earlier fake world would hand a later
    one a mesh whose groups were destroyed ("Could not resolve the process group registered under the
    name ..." after a few hundred checks in one process)."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._redistribute import _gen_transform_infos

    torch._C._clear_DTensor_sharding_propagator_cache()  # the C++ dispatch fast path's cache
    propagator = DTensor._op_dispatcher.sharding_propagator
    propagator.propagate_op_sharding.cache_clear()
    propagator._propagate_tensor_meta_cached.cache_clear()
    _gen_transform_infos.cache_clear()


def stop_fake_world() -> None:
    """Tear down the fake process group (leaves a real one alone)."""
    if dist.is_initialized() and dist.get_backend() == "fake":
        dist.destroy_process_group()


def uses_mixed_precision(plan: Plan) -> bool:
    """bf16 compute with fp32 gradient reduction: the plan's 2-byte parameters and 4-byte reduction."""
    return plan.config.param_bytes == 2


def _shard(stage: nn.Module, pmesh: Any, zero: int, tied: bool, mixed: bool) -> None:
    """FSDP2 as ``planner.runtime.fsdp.apply_fsdp`` does (experts over the expert-data-parallel mesh),
    with ``mixed`` precision."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    from planner.runtime.fsdp import apply_fsdp

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed else MixedPrecisionPolicy()
    apply_fsdp(stage, pmesh.dp_mesh(), zero=zero, tied=tied, expert_mesh=pmesh.expert_dp_mesh(), mp_policy=policy)  # type: ignore[arg-type]


def build_rank(plan: Plan, module: nn.Module, pp_rank: int, fake_mode: FakeTensorMode, tokens: bool = True) -> RankBuild:
    """Apply ``plan`` to ``module`` (on ``meta``) as pipeline rank ``pp_rank`` and materialise its
    chunks as fake tensors in ``fake_mode``. The fake world must be started (:func:`start_fake_world`).
    ``tokens``: the model reads token ids (its loss is vocab-parallel under tp, as ``planner.apply``'s)."""
    from planner.runtime.layers import map_layers
    from planner.runtime.mesh import build_mesh
    from planner.runtime.stage import build_stages

    m = plan.mesh
    lmap = map_layers(module, plan)
    tied = lmap.tied
    if tied and (m.tp > 1 or m.pp > 1):  # the head gets its own copy, as planner.apply does (planner.runtime.tied)
        from planner.runtime.tied import untie

        module, tied = untie(module, lmap)[0], False
    pmesh = build_mesh(plan, FAKE_DEVICE.type, dist.get_world_size())
    chunks = [k for k in range(len(plan.stages)) if k % m.pp == pp_rank]
    stages = build_stages(module, lmap, [(plan.stages[k].layers, list(plan.stages[k].layer_recompute)) for k in chunks])
    loss_parallel = m.tp > 1 and tokens
    tp_mesh = pmesh.mesh["tp"] if m.tp > 1 else None
    if m.tp > 1:
        from planner.runtime.tensor_parallel import apply_tensor_parallel

        for stage in stages:
            apply_tensor_parallel(stage, tp_mesh, sp=m.sp, loss_parallel=loss_parallel, local_logits=m.pp > 1)
    if m.ep > 1:
        from planner.runtime.expert_parallel import shard_experts

        shard_experts(stages, pmesh)
    mixed = uses_mixed_precision(plan)
    if m.dp * m.cp > 1 or mixed:  # FSDP2 over dp x cp under context parallelism, as planner.apply
        for stage in stages:
            _shard(stage, pmesh, m.zero, tied, mixed)
    with fake_mode:
        for stage in stages:
            stage.to_empty(device=FAKE_DEVICE)
    if m.cp > 1:  # cp rank 0's chunks, as planner.apply shards them
        from planner.runtime.context_parallel import shard_positions

        shard_positions(stages, (m.cp, 0))
    return RankBuild(pp_rank=pp_rank, chunks=chunks, stages=stages, loss_parallel=loss_parallel, tp_mesh=tp_mesh,
                     sp_shards=m.tp if (m.sp and m.tp > 1) else 1, mixed_precision=mixed, cp=m.cp,
                     cp_group=pmesh.mesh["cp"].get_group() if m.cp > 1 else None)
