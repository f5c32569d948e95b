"""Heterogeneous replicas that pipeline (issue 22): each replica its own stage split and share.

Ranks and gradient groups are laid out by :mod:`planner.runtime.hetero_layout`. Each rank holds its
stage (:class:`planner.runtime.stage.StageModule`, the plan's layers of the unsplit model, with the
replica's recomputation) and runs its replica's ``m_r`` micro-batches through the replica's pipeline
in GPipe order (Huang et al. 2019): every forward first (receive the activation from the previous
stage, compute, send it on), then every backward in the same micro-batch order (receive the output's
gradient, backward, send the input's gradient back), with blocking ``torch.distributed`` point-to-
point calls between the replica's neighbouring ranks. The loop is written out rather than taken from
``torch.distributed.pipelining`` so that every forward and every backward is timed on its own (a
rank's compute, injected wait and communication are kept apart, and a slowed rank sleeps after each
of them) and so that replicas of different depths and micro-batch counts need no shared schedule.
The price is GPipe's memory: a stage holds every micro-batch's activations until its backward (the
plan priced 1F1B's at most ``pp`` in flight), and its bubble is GPipe's.

Gradients (``costmodel.hetero.gradient_weights``): the last stage's loss is the micro-batch mean
over ``m_r`` (``g_r = (1/m_r) Σ ∇ℓ_i``), each rank scales its gradients by ``w_r = D m_r / M`` and
every layer's gradient is the mean over the D ranks that hold it (one per replica):
``(1/D) Σ_r w_r g_r = (1/M) Σ_all ∇ℓ_i``, the one-process update (equal micro-batch sizes). One
flat all-reduce per group of ranks holding the same layers (:func:`hetero_layout.sync_sets`). Tied
embedding and head weights are untied (:func:`planner.runtime.tied.untie`) and their copies'
weighted gradients are summed over every rank holding either copy, so both copies stay equal.
AdamW then updates each rank's parameters; every replica's copy of a layer takes the same gradient
from the same start, so the replicas stay in step.

Tensor parallelism inside a stage: the stage's ``tp`` consecutive ranks split it as the homogeneous
runtime does (:func:`planner.runtime.tensor_parallel.apply_tensor_parallel`: DTensor TP, sequence
parallelism as planned, the head's logits left vocabulary-sharded for torch's ``loss_parallel``
cross-entropy). Each tp rank sends to and receives from the same tp rank of the neighbouring stages
(activations are replicated, or sequence shards under SP, alike on both sides), and gradient groups
are per tp shard: the local shards of a layer's parameters at tp rank ``t`` are averaged over the
replicas' tp-rank-``t`` holders. A rank's compute seconds then include its stage's tensor-parallel
collectives (and the wait in them for a slower tp partner).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from costmodel.hetero import gradient_weights
from planner.errors import InputError
from planner.plans.schema import Plan
from planner.runtime.hetero_layout import RankRole, rank_roles, replica_counts, sync_sets
from planner.runtime.stage import ROOT, StageModule
from planner.runtime.step_timing import Loss, StepTiming, logits_of

_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
"""Activation dtypes a stage may send (the header carries the index)."""
_HEADER = 8
"""Header length: dtype index, number of dimensions, then up to six sizes."""


@dataclass
class SyncGroup:
    """One gradient group: the ranks holding the same shard of the same layers, and this rank's slots in it."""

    ranks: tuple[int, ...]
    group: dist.ProcessGroup | None
    slots: list[tuple[str, ...]]
    """One entry per gradient element block: the local names of one parameter (two for a tied pair
    held whole on this rank, whose gradients are summed)."""


@dataclass
class PipeRuntime:
    """This rank's stage of its replica, its peers and its gradient groups."""

    stage: StageModule
    role: RankRole
    roles: list[RankRole]
    optimizer: torch.optim.Optimizer
    micro_batch: int
    loss_fn: Loss
    groups: list[SyncGroup]
    tp_mesh: Any = None
    """The stage's tensor-parallel DeviceMesh (None at tp 1)."""
    speed: float = 1.0
    timings: list[StepTiming] = field(default_factory=list)
    p2p: list[float] = field(default_factory=list)
    """Seconds per step in point-to-point sends and receives (pipeline bubbles included)."""

    @property
    def counts(self) -> list[int]:
        """Micro-batches of each replica."""
        return replica_counts(self.roles)

    def peer(self, offset: int) -> int:
        """Rank of the stage ``offset`` away in this rank's replica."""
        me = self.role
        return next(r.rank for r in self.roles if r.replica == me.replica and r.stage == me.stage + offset and r.tp_rank == me.tp_rank)

    def rows(self, tokens: torch.Tensor) -> torch.Tensor:
        """This replica's rows of the global batch (batch, seq + 1)."""
        counts = self.counts
        if tokens.shape[0] != sum(counts) * self.micro_batch:
            raise InputError(f"global batch {tokens.shape[0]} != shares {counts} x micro-batch {self.micro_batch}")
        start = sum(counts[: self.role.replica]) * self.micro_batch
        return tokens[start:start + self.role.micro_batches * self.micro_batch]

    def step(self, tokens: torch.Tensor) -> float:
        """One training step on the global batch; the mean loss over the whole batch (every rank)."""
        self.optimizer.zero_grad(set_to_none=False)
        clock = _Clock(self.speed)
        with self._context():
            total = self._forward_backward(self.rows(tokens), clock)
        start = time.perf_counter()
        counted = total if self.role.tp_rank == 0 else 0.0  # the loss is replicated over a stage's tp ranks
        loss = self._sync(counted * self.role.micro_batches / sum(self.counts))
        sync = time.perf_counter() - start
        self.optimizer.step()
        self.timings.append(StepTiming(compute_s=clock.compute, wait_s=clock.wait, sync_s=sync))
        self.p2p.append(clock.p2p)
        return loss

    def _context(self) -> Any:
        """torch's vocab-parallel cross-entropy under tensor parallelism (forward and backward)."""
        if self.tp_mesh is None:
            return contextlib.nullcontext()
        from torch.distributed.tensor.parallel import loss_parallel

        return loss_parallel()

    def _forward_backward(self, mine: torch.Tensor, clock: _Clock) -> float:
        """GPipe order over this replica's micro-batches; the sum of the micro-batch losses / m_r (last stage)."""
        first, last, m = self.role.stage == 0, self.role.stage == self.role.stages - 1, self.role.micro_batches
        saved: list[tuple[torch.Tensor, torch.Tensor]] = []
        total = 0.0
        for chunk in mine.split(self.micro_batch):
            x = chunk[:, :-1] if first else clock.comm(lambda: _recv(self.peer(-1))).requires_grad_()
            out = clock.run(lambda: self._forward(x, chunk[:, 1:], last, m))
            if last:
                total += float(out.detach())
            else:
                clock.comm(lambda: _send(out.detach(), self.peer(1)))
            saved.append((x, out))
        for x, out in saved:
            grad = None if last else clock.comm(lambda: _recv_like(out, self.peer(1)))
            clock.run(lambda: torch.autograd.backward(out, grad))
            if not first:
                clock.comm(lambda: dist.send(x.grad.contiguous(), self.peer(-1)))
        return total

    def _forward(self, x: torch.Tensor, labels: torch.Tensor, last: bool, m: int) -> torch.Tensor:
        out = self.stage(x)
        if not last:
            return out
        if self.tp_mesh is None:
            return self.loss_fn(logits_of(out), labels) / m
        from planner.runtime.apply import _vocab_sharded_loss

        return _vocab_sharded_loss(self.loss_fn, self.tp_mesh, logits_of(out), labels) / m

    @torch.no_grad()
    def _sync(self, loss_part: float) -> float:
        """Weighted mean of every layer's gradient over its holders, then the loss summed over the world."""
        params = dict(self.stage.named_parameters())
        weight, replicas = gradient_weights(self.counts)[self.role.replica], len(self.counts)
        for g in self.groups:
            if len(g.ranks) < 2:
                continue
            parts = [sum(_local_grad(params[ROOT + n]) for n in slot) for slot in g.slots]
            flat = torch.cat([p.reshape(-1) for p in parts]) * weight
            dist.all_reduce(flat, group=g.group)
            flat /= replicas
            offset = 0
            for slot, part in zip(g.slots, parts):
                for n in slot:
                    _set_grad(params[ROOT + n], flat[offset:offset + part.numel()].view_as(part).clone())
                offset += part.numel()
        value = torch.tensor([loss_part], dtype=torch.float64)
        dist.all_reduce(value)
        return float(value)


class _Clock:
    """Compute, injected wait and point-to-point seconds of one step (see the module docstring)."""

    def __init__(self, speed: float) -> None:
        self.speed, self.compute, self.wait, self.p2p = speed, 0.0, 0.0, 0.0

    def run(self, call: Callable[[], torch.Tensor | None]) -> torch.Tensor:
        """``call()`` timed as compute; a slowed rank then sleeps ``(1/speed - 1)`` x that time."""
        start = time.perf_counter()
        out = call()
        seconds = time.perf_counter() - start
        self.compute += seconds
        if self.speed < 1.0:
            extra = (1.0 / self.speed - 1.0) * seconds
            time.sleep(extra)
            self.wait += extra
        return out  # type: ignore[return-value]

    def comm(self, call: Callable[[], torch.Tensor | None]) -> torch.Tensor:
        start = time.perf_counter()
        out = call()
        self.p2p += time.perf_counter() - start
        return out  # type: ignore[return-value]


def _local_grad(p: nn.Parameter) -> torch.Tensor:
    """This rank's shard of ``p``'s gradient, in ``p``'s own placements (zeros when it has none)."""
    from torch.distributed.tensor import DTensor

    if not isinstance(p, DTensor):
        return p.grad if p.grad is not None else torch.zeros_like(p)
    if p.grad is None:
        return torch.zeros_like(p.to_local())
    grad = p.grad if p.grad.placements == p.placements else p.grad.redistribute(p.device_mesh, p.placements)
    return grad.to_local()


def _set_grad(p: nn.Parameter, local: torch.Tensor) -> None:
    """Give ``p`` the gradient whose local shard is ``local``."""
    from torch.distributed.tensor import DTensor

    p.grad = DTensor.from_local(local, p.device_mesh, p.placements, run_check=False) if isinstance(p, DTensor) else local


def _send(t: torch.Tensor, peer: int) -> None:
    """A header (dtype, shape), then the tensor."""
    if t.dtype not in _DTYPES or t.dim() > _HEADER - 2:
        raise InputError(f"a stage output of {t.dtype} with {t.dim()} dimensions cannot be sent between stages")
    header = torch.zeros(_HEADER, dtype=torch.int64)
    header[0], header[1] = _DTYPES.index(t.dtype), t.dim()
    header[2:2 + t.dim()] = torch.tensor(t.shape)
    dist.send(header, peer)
    dist.send(t.contiguous(), peer)


def _recv(peer: int) -> torch.Tensor:
    header = torch.empty(_HEADER, dtype=torch.int64)
    dist.recv(header, peer)
    dims = int(header[1])
    out = torch.empty([int(s) for s in header[2:2 + dims]], dtype=_DTYPES[int(header[0])])
    dist.recv(out, peer)
    return out


def _recv_like(t: torch.Tensor, peer: int) -> torch.Tensor:
    out = torch.empty_like(t)
    dist.recv(out, peer)
    return out


def build_pipe_runtime(plan: Plan, module: nn.Module, *, speed: float = 1.0,
                       make_optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer], loss_fn: Loss) -> PipeRuntime:
    """This rank's :class:`PipeRuntime` of ``plan`` from the unsplit ``module`` (materialised on CPU, the
    same weights on every rank); every rank must call it (it creates the gradient groups)."""
    from planner.runtime.layers import map_layers
    from planner.runtime.stage import build_stages

    roles = rank_roles(plan)
    world, rank = dist.get_world_size(), dist.get_rank()
    if len(roles) != world:
        raise InputError(f"the plan's replicas take {len(roles)} ranks (stages x tp), the world has {world}; "
                         f"launch with --nproc-per-node {len(roles)}")
    lmap = map_layers(module, plan)
    module, tied = _untied(module, lmap)
    owner = {n: layer for n, layer in _param_layers(module, lmap).items() if not tied or n not in tied[1]}
    role = roles[rank]
    stage = build_stages(module, lmap, [(list(role.layers), list(role.recompute))])[0]
    tp_mesh = _tensor_parallel(stage, plan, world)
    local = {n.removeprefix(ROOT) for n, _ in stage.named_parameters()}
    groups = []
    for ranks, layers in sync_sets(roles, len(lmap.units), tied[0] if tied else None):
        group = None if len(ranks) in (1, world) else dist.new_group(list(ranks))
        if rank in ranks:
            slots = [(n,) for layer in layers if layer >= 0 for n, at in owner.items() if at == layer]
            if -1 in layers:
                slots.append(tuple(n for n in tied[1] if n in local))
            groups.append(SyncGroup(ranks=ranks, group=group, slots=slots))
    return PipeRuntime(stage=stage, role=role, roles=roles, optimizer=make_optimizer(list(stage.parameters())),
                       micro_batch=plan.schedule.micro_batch, loss_fn=loss_fn, groups=groups, tp_mesh=tp_mesh, speed=speed)


def _tensor_parallel(stage: StageModule, plan: Plan, world: int) -> Any:
    """Split ``stage`` over its ``tp`` consecutive ranks as the homogeneous runtime does
    (:func:`planner.runtime.tensor_parallel.apply_tensor_parallel`, the head's logits left as this
    rank's vocabulary shard); the tp DeviceMesh, or None at tp 1. Every rank builds the whole
    (stages x tp) mesh, as DeviceMesh requires."""
    tp = plan.mesh.tp
    if tp == 1:
        return None
    from torch.distributed.device_mesh import init_device_mesh

    from planner.runtime.tensor_parallel import apply_tensor_parallel

    tp_mesh = init_device_mesh("cpu", (world // tp, tp), mesh_dim_names=("stage", "tp"))["tp"]
    apply_tensor_parallel(stage, tp_mesh, sp=plan.mesh.sp, loss_parallel=True, local_logits=True)
    return tp_mesh


@torch.no_grad()
def _untied(module: nn.Module, lmap: object) -> tuple[nn.Module, tuple[tuple[int, int], tuple[str, str]] | None]:
    """``module`` with a tied head given its own copy of the embedding's weights, and ((embedding layer,
    head layer), (embedding name, head name)); None when nothing is tied."""
    from planner.runtime.tied import untie

    if not lmap.tied:  # type: ignore[attr-defined]
        return module, None
    module, pairs = untie(module, lmap)  # type: ignore[arg-type]
    if len(pairs) != 1:
        raise InputError(f"heterogeneous pipelines untie one embedding / head pair; this model ties {len(pairs)}")
    pair = pairs[0]
    module.get_parameter(pair.head).copy_(module.get_parameter(pair.embedding))
    units = lmap.units  # type: ignore[attr-defined]
    layers = (next(u.index for u in units if u.kind == "embedding"), next(u.index for u in reversed(units) if u.kind == "head"))
    return module, (layers, (pair.embedding, pair.head))


def _param_layers(module: nn.Module, lmap: object) -> dict[str, int]:
    """Unsplit parameter name -> plan layer, module order (the same on every rank)."""
    out: dict[str, int] = {}
    for unit in lmap.units:  # type: ignore[attr-defined]
        for path in (unit.path, *unit.positions):
            for n, _ in module.get_submodule(path).named_parameters():
                out.setdefault(f"{path}.{n}", unit.index)
    return out
