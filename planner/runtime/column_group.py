"""Column-parallel projections that share an input reduce its gradient once (Megatron-LM's ``f`` / ``ḡ``).

DTensor's ``ColwiseParallel`` wraps a plain input as a replicated DTensor, so every column projection
all-reduces its own partial input gradient in backward: five all-reduces per Llama block (q, k, v,
gate, up), where Megatron-LM reduces once per sublayer (its fused QKV and fc1 projections follow one
``copy_to_tensor_model_parallel_region``, or under sequence parallelism one
``gather_from_sequence_parallel_region`` whose backward reduce-scatters; Shoeybi et al. 2019 §3,
Korthikanti et al. 2022 §4.2.2). torchtitan gets the same by keeping the gathered input a DTensor
for the whole attention / MLP module.

:class:`GroupedColwise` keeps the input a plain tensor for the module's own code and marks the
gradient it hands back as partial (``DTensor.from_local(grad_placements=[Partial()])``), so no
projection communicates on its own. Every projection that reads the same input tensor joins one
:class:`_Group`, kept on that tensor: backward adds their partial gradients and the last of them
reduces the sum once, an all-reduce, or under sequence parallelism, for an input just gathered from
sequence shards (:func:`mark_gathered`), a reduce-scatter onto this rank's sequence chunk (the
gathered input's own backward keeps exactly that chunk, ``Replicate`` -> ``Shard(1)``, torch.chunk
order). Other readers of the same tensor (residual adds, routers) return
their gradients through autograd as before, untouched by the reduction.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_module
from torch.distributed.tensor.parallel import ColwiseParallel

_GROUP_ATTR = "_meshplan_column_group"
"""Attribute of an input tensor holding the :class:`_Group` of the projections that read it."""
_GATHERED_ATTR = "_meshplan_sequence_gathered"
"""Attribute marking a tensor just all-gathered from sequence shards, whose backward keeps only this
rank's chunk of the gradient (:func:`mark_gathered`)."""


def mark_gathered(x: Any) -> None:
    """Mark ``x`` (a tensor, or a tuple whose first item is one) as gathered from ``Shard(1)``: its
    readers' summed gradient may be reduce-scattered. Unmarked inputs are all-reduced, which is
    right for any replicated input."""
    tensor = x[0] if isinstance(x, tuple) else x
    if isinstance(tensor, torch.Tensor) and not isinstance(tensor, DTensor):
        setattr(tensor, _GATHERED_ATTR, True)


@dataclass
class _Group:
    """Projections that read one input tensor in one forward pass, and their gradients so far."""

    mesh: DeviceMesh
    scatter: bool
    """The input was gathered from sequence shards (:func:`mark_gathered`): reduce-scatter the sum."""
    graph_task: int
    """Autograd graph task the forward ran in (-1 outside backward): a non-reentrant checkpoint
    recomputes the same input tensor inside backward, and its readers form a group of their own,
    which backward never reaches."""
    readers: int = 0
    arrived: int = 0
    partial: torch.Tensor | None = None

    def add(self, grad: torch.Tensor) -> torch.Tensor | None:
        """Add one reader's partial gradient; the last reader gets the reduced sum, the others None."""
        self.partial = grad if self.partial is None else self.partial + grad
        self.arrived += 1
        if self.arrived < self.readers:
            return None
        total, self.partial = self.partial, None
        return self._reduce(total)

    def _reduce(self, total: torch.Tensor) -> torch.Tensor:
        summed = DTensor.from_local(total, self.mesh, [Partial()], run_check=False)
        if not self.scatter:
            return summed.redistribute(self.mesh, [Replicate()]).to_local()
        chunk = summed.redistribute(self.mesh, [Shard(1)]).to_local()
        full = torch.zeros_like(total)
        torch.chunk(full, self.mesh.size(), dim=1)[self.mesh.get_local_rank()].copy_(chunk)
        return full


class _JoinGroup(torch.autograd.Function):
    """Identity forward; backward hands the partial gradient to the input's :class:`_Group`."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: _Group) -> torch.Tensor:  # type: ignore[override]
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None]:  # type: ignore[override]
        return ctx.group.add(grad), None


def _group_of(x: torch.Tensor, mesh: DeviceMesh) -> _Group:
    """The group of the projections reading ``x`` in this forward pass, joined by one more reader."""
    task = torch._C._current_graph_task_id()
    group = getattr(x, _GROUP_ATTR, None)
    if group is None or group.graph_task != task:
        group = _Group(mesh, getattr(x, _GATHERED_ATTR, False), task)
        setattr(x, _GROUP_ATTR, group)
    group.readers += 1
    return group


class GroupedColwise(ColwiseParallel):
    """``ColwiseParallel`` for a projection whose replicated input other projections also read: the
    input gradient is reduced once per input tensor (see the module docstring); inputs marked by
    :func:`mark_gathered` were gathered from sequence shards (``Shard(1)``), so their reduction
    reduce-scatters."""

    def _apply(self, module: torch.nn.Module, device_mesh: DeviceMesh) -> torch.nn.Module:
        def prepare_input(_module: torch.nn.Module, inputs: tuple[Any, ...], mesh: DeviceMesh) -> DTensor:
            x = inputs[0]
            if isinstance(x, DTensor):
                return x.redistribute(mesh, [Replicate()])
            joined = _JoinGroup.apply(x, _group_of(x, mesh)) if x.requires_grad else x
            return DTensor.from_local(joined, mesh, [Replicate()], run_check=False, grad_placements=[Partial()])

        return distribute_module(
            module, device_mesh, self._partition_linear_fn, prepare_input,  # type: ignore[arg-type]
            partial(self._prepare_output_fn, self.output_layouts, self.use_local_output),
        )
