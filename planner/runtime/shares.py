"""Uneven data-parallel shares on torch.distributed (issue 22), and injected slowdowns.

:class:`ShareRuntime` trains a data-parallel plan whose replica r (rank r) runs ``counts[r]``
micro-batches per step: rank r takes rows ``[offset_r, offset_r + counts[r] * micro_batch)`` of the
global batch, averages its loss over its micro-batches (``g_r = (1/m_r) Σ ∇ℓ_i``), scales that
gradient by its weight ``w_r = D m_r / M`` (``costmodel.hetero.gradient_weights``) and all-reduces
the mean over the D ranks: ``(1/D) Σ_r w_r g_r = (1/M) Σ_all ∇ℓ_i``, exactly the update of the
one-process run on the whole batch (equal micro-batch sizes). One all-reduce per step, whatever the
share, so ranks with different micro-batch counts never mismatch collectives.

``speed`` < 1 emulates a slow GPU on CPU: after each micro-batch's forward and after its backward
the rank sleeps ``(1/speed - 1)`` times what that compute took, so that its busy time is the
compute's divided by ``speed``. Per step it records the compute seconds, the injected wait, and the
seconds spent in the gradient all-reduce (which include waiting for slower ranks).

Replicas here are whole models on one rank each (``tp = pp = cp = 1``). Replicas that pipeline (a
heterogeneous plan's per-replica stage splits, or a uniform plan with ``pp`` > 1 run with an injected
slowdown) or use tensor parallelism run on :mod:`planner.runtime.hetero_pipeline`, with the same weights, timings and
slowdowns, and so do replicas split by tensor parallelism; context parallelism is refused with one line.
"""

from __future__ import annotations

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
from planner.runtime.step_timing import Loss, StepTiming, logits_of
from planner.runtime.tasks import Batch, batch_rows, split_rows


def plan_counts(plan: Plan) -> list[int]:
    """Micro-batches of each rank: the plan's shares, or ``num_microbatches`` each for a uniform plan."""
    if plan.hetero is not None:
        return [r.micro_batches for r in plan.hetero.replicas]
    return [plan.schedule.num_microbatches] * plan.mesh.dp


def replica_of(plan: Plan, rank: int) -> int:
    """The replica (index into the plan's shares) that ``rank`` runs: the replicas in the order of their
    GPUs, so that rank r runs the r-th GPU the plan uses (rank 3 is GPU 3 when every GPU is used: the
    GPU ``--slow 3=...`` planned for is the rank ``--inject-slowdown 3=...`` slows), as the pipelined
    runtime numbers them (:mod:`planner.runtime.hetero_layout`); replica ``rank`` of a uniform plan."""
    if plan.hetero is None:
        return rank
    replicas = plan.hetero.replicas
    return sorted(range(len(replicas)), key=lambda i: replicas[i].stages[0].devices[0])[rank]


def share_ranks(plan: Plan) -> int:
    """Ranks a run of uneven shares or an injected slowdown takes: one per replica, or one per stage of
    every replica when replicas pipeline (:func:`planner.runtime.hetero_layout.rank_roles`)."""
    from planner.runtime.hetero_layout import is_pipelined, rank_roles

    return len(rank_roles(plan)) if is_pipelined(plan) else len(plan_counts(plan))


def check_share_plan(plan: Plan, world: int) -> None:
    """One-line :class:`InputError` unless every replica is one whole model on one rank, or split into
    pipeline stages and tensor-parallel shards (cp 1); and the world has a rank for each."""
    from planner.runtime.hetero_layout import is_pipelined

    if is_pipelined(plan):
        if share_ranks(plan) != world:
            raise InputError(f"the plan's replicas take {share_ranks(plan)} ranks (stages x tp), the world has {world}; "
                             f"launch with --nproc-per-node {share_ranks(plan)}")
        return
    m = plan.mesh
    if m.tp * m.pp * m.cp != 1:
        raise InputError(f"uneven shares and injected slowdowns run plans of whole-model replicas (tp 1, pp 1, cp 1); "
                         f"this plan has tp {m.tp}, pp {m.pp}, cp {m.cp}")
    if len(plan_counts(plan)) != world:
        raise InputError(f"the plan has {len(plan_counts(plan))} replicas, the world {world} ranks; "
                         f"launch with --nproc-per-node {len(plan_counts(plan))}")


@dataclass
class ShareRuntime:
    """This rank's replica, its share and its emulated speed."""

    module: nn.Module
    optimizer: torch.optim.Optimizer
    counts: list[int]
    micro_batch: int
    rank: int
    """The replica this rank runs (:func:`replica_of`): its rows of the batch and its gradient weight."""
    loss_fn: Loss
    speed: float = 1.0
    timings: list[StepTiming] = field(default_factory=list)

    @property
    def weight(self) -> float:
        return gradient_weights(self.counts)[self.rank]

    def rows(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's rows of the global batch (token ids (batch, seq + 1), or (inputs, targets) of a
        model without tokens, :mod:`~planner.runtime.tasks`): inputs, labels."""
        total = sum(self.counts) * self.micro_batch
        if batch_rows(batch) != total:
            raise InputError(f"global batch {batch_rows(batch)} != shares {self.counts} x micro-batch {self.micro_batch}")
        start = sum(self.counts[: self.rank]) * self.micro_batch
        return split_rows(batch, start, start + self.counts[self.rank] * self.micro_batch, torch.device("cpu"))

    def step(self, batch: Batch) -> float:
        """One training step on the global batch; returns the mean loss over the whole batch."""
        (inputs, labels), m = self.rows(batch), self.counts[self.rank]
        self.optimizer.zero_grad(set_to_none=False)
        compute = wait = total = 0.0
        for x, y in zip(inputs.split(self.micro_batch), labels.split(self.micro_batch)):
            start = time.perf_counter()
            loss = self.loss_fn(logits_of(self.module(x)), y) / m
            forward = time.perf_counter() - start
            wait += self._slow(forward)
            start = time.perf_counter()
            loss.backward()
            backward = time.perf_counter() - start
            wait += self._slow(backward)
            compute += forward + backward
            total += float(loss.detach())
        start = time.perf_counter()
        mean_loss = self._reduce(total * m / sum(self.counts))
        sync = time.perf_counter() - start
        self.optimizer.step()
        self.timings.append(StepTiming(compute_s=compute, wait_s=wait, sync_s=sync))
        return mean_loss

    def _slow(self, compute_s: float) -> float:
        """Sleep ``(1/speed - 1) x compute_s`` (nothing at full speed); the seconds slept."""
        if self.speed >= 1.0:
            return 0.0
        extra = (1.0 / self.speed - 1.0) * compute_s
        time.sleep(extra)
        return extra

    def _reduce(self, loss_part: float) -> float:
        """Weight this rank's gradient, mean all-reduce every gradient in one flat buffer, and sum the
        loss parts (``m_r / M`` of each rank's mean loss) in the same call."""
        params = [p for p in self.module.parameters() if p.requires_grad]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) * self.weight for g in grads] + [torch.tensor([loss_part], dtype=grads[0].dtype)])
        dist.all_reduce(flat)
        flat[:-1] /= len(self.counts)
        offset = 0
        for p, g in zip(params, grads):
            n = g.numel()
            p.grad = flat[offset:offset + n].view_as(p).clone()
            offset += n
        return float(flat[-1])


def apply_shares(plan: Plan, module: nn.Module, *, speed: float = 1.0, optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer] | None = None,
                 loss_fn: Loss | None = None, device_type: str | None = None) -> Any:
    """``planner.apply`` for a plan with uneven shares: this rank's replica of ``module`` (materialised,
    on CPU) with its share, or its stage of a pipelined replica
    (:class:`planner.runtime.hetero_pipeline.PipeRuntime`); ``step(tokens) -> loss`` as
    :class:`planner.runtime.apply.Runtime`'s."""
    from planner.runtime.apply import default_optimizer, next_token_loss
    from planner.runtime.hetero_layout import is_pipelined

    if not dist.is_initialized():
        raise InputError("planner.apply needs an initialised process group: start under torchrun and call "
                         "torch.distributed.init_process_group() first")
    if device_type not in (None, "cpu"):
        raise InputError(f"uneven shares run on CPU gloo ranks here, not {device_type!r:.20}")
    check_share_plan(plan, dist.get_world_size())
    make = optimizer or default_optimizer
    if is_pipelined(plan):
        from planner.runtime.hetero_pipeline import build_pipe_runtime

        return build_pipe_runtime(plan, module, speed=speed, make_optimizer=make, loss_fn=loss_fn or next_token_loss)
    return ShareRuntime(module=module, optimizer=make(list(module.parameters())), counts=plan_counts(plan),
                        micro_batch=plan.schedule.micro_batch, rank=replica_of(plan, dist.get_rank()), loss_fn=loss_fn or next_token_loss,
                        speed=speed)
