"""ZeRO / FSDP with FSDP2 (``torch.distributed.fsdp.fully_shard``), torchtitan's ``apply_fsdp``.

Every layer of a stage with parameters is one FSDP unit, the stage module is the root unit
(parameters shared between layers, tied embeddings, stay in the root). The data-parallel mesh is
2-D (replicate, shard) (:mod:`planner.runtime.mesh`):

- ZeRO 3: parameters, gradients and optimizer states sharded over ``dp``; parameters are freed
  after forward and gathered again for backward (``reshard_after_forward=True``; Rajbhandari et al.
  2020, stage P_os+g+p).
- ZeRO 1 and 2: FSDP2 has no optimizer-only sharding; the closest it allows is to keep parameters
  gathered from forward to backward (``reshard_after_forward=False``): gradients are reduce-scattered
  and optimizer states sharded (ZeRO-2) and parameters are gathered once per step. ZeRO 1 runs as
  ZeRO 2 (same numerics; gradient memory is that of ZeRO 2).
- ZeRO 0: replication only, FSDP2 HSDP with one shard per replica (gradients all-reduced, as DDP).

Gradients are averaged over the data-parallel ranks (FSDP2's default reduction); under context
parallelism the mesh is the dp x cp ranks (:meth:`planner.runtime.mesh.PlanMesh.dp_mesh`), so the
average covers both.

Under expert parallelism each rank's experts (:class:`~planner.runtime.expert_parallel.ParallelExperts`)
are an FSDP unit of their own over the expert-data-parallel mesh (the ``dp / ep`` ranks holding the
same experts, :meth:`~planner.runtime.mesh.PlanMesh.expert_dp_mesh`), with the same ZeRO stage, as
torchtitan's ``apply_fsdp`` shards MoE experts over ``dp_mod_ep``; the layer's other parameters
stay in the layer's unit over ``dp``. When the local experts do not split evenly over the shards (one
expert per rank under ``ep = dp / 2``) dim 0 would leave some shards empty and others whole, so the
experts are sharded along dim 1 instead, as torchtitan's ``_experts_shard_placement_fn`` does.

The estimate follows this runtime, not the other way round: the cost model's ``native`` engine
(``costmodel.engines``, ``costmodel.rank_memory``) prices every ZeRO level as run here, FSDP2 with
fp32 sharded parameters, gradients and Adam states (ZeRO 1 as ZeRO 2), bf16 parameters gathered from
forward to backward (ZeRO 0-2, and under PP, where ``torch.distributed.pipelining`` keeps them
gathered until the step's gradient reduction) and, under PP, unsharded fp32 gradients accumulated
across the micro-batches. Issue 21's "+31 % on ZeRO 1 under PP" was the memory check stopping its
interleaved schedule before the steady state, where every chunk's accumulated gradients meet a full
warm-up of activations (``planner.runtime.memcheck.step.steady_pairs``); measured there, the
prediction is within the band.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Shard

from planner.runtime.stage import StageModule


def apply_fsdp(stage: StageModule, dp_mesh: DeviceMesh, *, zero: int, tied: bool,
               expert_mesh: DeviceMesh | None = None, **kwargs: Any) -> None:
    """Shard ``stage`` over ``dp_mesh`` as ZeRO ``zero`` says, its EP experts over ``expert_mesh``
    (see the module docstring); ``kwargs`` go to every ``fully_shard`` (the memory check's precision)."""
    from planner.runtime.expert_parallel import expert_modules

    reshard = zero == 3
    for unit in stage.units:
        module = stage.layer(unit)
        if tied and unit.kind in ("embedding", "head"):
            continue
        for _, experts in expert_modules(module):
            fresh_outputs(experts)
            fully_shard(experts, mesh=expert_mesh, reshard_after_forward=reshard,
                        shard_placement_fn=partial(_expert_placement, experts.local, expert_mesh), **kwargs)
        if any(True for _ in module.parameters()):
            fresh_outputs(module)
            fully_shard(module, mesh=dp_mesh, reshard_after_forward=reshard, **kwargs)
    fresh_outputs(stage)
    fully_shard(stage, mesh=dp_mesh, reshard_after_forward=reshard, **kwargs)


def fresh_outputs(module: nn.Module) -> None:
    """Make ``module`` (about to become an FSDP unit) return no view tensors.

    FSDP2 registers its pre-backward hook on each output tensor of a unit; an in-place op on an output
    that is a view (the sequence-parallel embedding's local shard, ``DTensor.to_local()``) would drop
    that hook and skip the backward all-gather (FSDP2's own warning, ``FSDPState._register_pre_backward_hook``,
    torch/distributed/fsdp/_fully_shard/_fsdp_state.py). A forward hook registered before ``fully_shard``
    runs before FSDP2's (which it appends) and replaces every view among the outputs by a copy."""
    module.register_forward_hook(_copy_views)


def _copy_views(module: nn.Module, args: object, output: object) -> object:
    if isinstance(output, torch.Tensor):
        return output.clone() if output._base is not None else output
    if isinstance(output, tuple):
        return type(output)(*(_copy_views(module, args, x) for x in output)) if hasattr(output, "_fields") \
            else tuple(_copy_views(module, args, x) for x in output)
    return output


def _expert_placement(local: int, mesh: DeviceMesh, param: nn.Parameter) -> Shard:
    """Dim 0 (experts) when the ``local`` experts split evenly over the mesh's shards, else dim 1."""
    shards = mesh.size(-1)
    return Shard(0) if local % shards == 0 or param.shape[1] % shards else Shard(1)
