"""``planner.apply(plan, module)``: run a plan's split of a model on torch.distributed.

On an initialised process group of ``dp x tp x pp x cp`` ranks, :func:`apply` builds the plan's
DeviceMesh (:mod:`~planner.runtime.mesh`), maps the plan's layers to the module's units
(:mod:`~planner.runtime.layers`), keeps this rank's pipeline chunks (:mod:`~planner.runtime.stage`),
applies tensor / sequence parallelism (:mod:`~planner.runtime.tensor_parallel`), expert
parallelism (:mod:`~planner.runtime.expert_parallel`), FSDP2
(:mod:`~planner.runtime.fsdp`), the plan's per-layer recomputation and its pipeline schedule
(:mod:`~planner.runtime.pipeline`). Everything is PyTorch's own: DTensor, FSDP2, checkpointing and
``torch.distributed.pipelining``.

Parameters may live on ``meta`` (with any backend, the fake one included): nothing is materialised
here. :func:`planner.runtime.init.materialize` gives them values (``meshplan run`` does it from a
seed). The returned :class:`Runtime` runs a training step (``step(batch) -> loss``) and exposes
the local stage modules for custom loops.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Iterator

import torch
import torch.distributed as dist
from torch import nn

from planner.errors import InputError
from planner.runtime.context_parallel import check_context_parallel, cp_attention, shard_positions, shard_sequence
from planner.runtime.layers import LayerMap, map_layers
from planner.runtime.mesh import PlanMesh, build_mesh
from planner.runtime.pipeline import local_chunks
from planner.runtime.precision import FP32, RunPrecision, make_optimizer, mp_policy, plan_precision
from planner.runtime.stage import ROOT, StageModule, build_stages
from planner.runtime.tasks import Batch, batch_rows, next_token_loss, reads_tokens, regression_loss, split_rows
from planner.plans.schema import Plan

Optimizer = Callable[[list[nn.Parameter]], torch.optim.Optimizer]


def default_optimizer(params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """AdamW (Loshchilov and Hutter 2019) with PyTorch's defaults and lr 1e-3."""
    return torch.optim.AdamW(params, lr=1e-3)


@dataclass
class Runtime:
    """This rank's share of a plan: stage modules, the mesh, the schedule and the optimizer."""

    plan: Plan
    mesh: PlanMesh
    layers: LayerMap
    stages: list[StageModule]
    """Local chunks (one without pipelining, ``virtual_stages`` with interleaving)."""
    chunks: list[int]
    """Plan chunk index of each local stage."""
    device: torch.device
    loss_parallel: bool
    make_optimizer: Optimizer = default_optimizer
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = next_token_loss
    schedule: Any = None
    tied: list[Any] = field(default_factory=list)
    """Tied embedding / head pairs (:mod:`~planner.runtime.tied`), whose copies' gradients are summed."""
    tied_group: Any = None
    precision: RunPrecision = FP32
    """The dtypes this runtime trains with (:mod:`~planner.runtime.precision`)."""
    compiled: int = 0
    """Transformer blocks compiled with ``torch.compile`` (the plan's ``config.compile``)."""
    _optimizer: torch.optim.Optimizer | None = field(default=None, repr=False)

    def named_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        """Local parameters under the unsplit model's names (DTensors where sharded)."""
        for stage in self.stages:
            for name, p in stage.named_parameters():
                yield name.removeprefix(ROOT), p

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """Built on first use, so that it holds the materialised parameters."""
        if self._optimizer is None:
            self._optimizer = self.make_optimizer([p for _, p in self.named_parameters()])
        return self._optimizer

    def local_batch(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """This data-parallel rank's rows of the global batch: token ids (batch, seq + 1), or (inputs,
        targets) of a model without tokens (:mod:`~planner.runtime.tasks`); returns inputs, labels."""
        dp, rank, rows = self.mesh.dp, self.mesh.coordinate("dp"), batch_rows(batch)
        if rows % dp:
            raise InputError(f"global batch {rows} is not divisible by dp {dp}")
        per = rows // dp
        inputs, labels = split_rows(batch, rank * per, (rank + 1) * per, self.device)
        if self.mesh.cp == 1:
            return inputs, labels
        cp, cp_rank = self.mesh.cp, self.mesh.coordinate("cp")
        return shard_sequence(inputs, cp, cp_rank), shard_sequence(labels, cp, cp_rank)

    def step(self, batch: Batch) -> float:
        """One training step on the global batch (the same on every rank; see :meth:`local_batch`); the mean loss."""
        inputs, labels = self.local_batch(batch)
        opt = self.optimizer
        opt.zero_grad(set_to_none=True)
        cp = self.mesh.cp
        with contextlib.ExitStack() as stack:
            if self.loss_parallel:
                from torch.distributed.tensor.parallel import loss_parallel

                stack.enter_context(loss_parallel())
            stack.enter_context(cp_attention(self.mesh.mesh["cp"], cp, self.mesh.coordinate("cp"),
                                             self.plan.request.seq_len, self.device))
            loss = self._forward_backward(inputs, labels)
        self._check_gradients()
        if self.tied:
            from planner.runtime.tied import sum_tied_grads

            sum_tied_grads(dict(self.named_parameters()), self.tied, self.tied_group)
        opt.step()
        return self._mean_loss(loss)

    def _check_gradients(self) -> None:
        """Fail loudly when none of this rank's trainable parameters received a gradient: a schedule
        and sharding the native rules missed (``native-zb-h1-zero3`` was found this way) would
        otherwise step on nothing while the loss still looks right for a few steps."""
        params = [p for _, p in self.named_parameters() if p.requires_grad]
        if params and all(p.grad is None for p in params):
            raise RuntimeError(f"rank {dist.get_rank()}: no parameter of this rank received a gradient "
                               f"(schedule {self.plan.schedule.name}, zero {self.plan.mesh.zero}); a runtime bug")

    def _forward_backward(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor | None:
        n = self.plan.schedule.num_microbatches
        if self.schedule is None:
            total = torch.zeros((), device=self.device)
            for x, y in zip(inputs.chunk(n), labels.chunk(n)):
                loss = self.loss_fn(self.stages[0](x), y) / n
                loss.backward()
                total += _plain(loss.detach())
            return total
        pp_rank, pp = self.mesh.coordinate("pp"), self.mesh.pp
        losses: list[torch.Tensor] = []
        args = (inputs,) if pp_rank == 0 else ()
        last = pp_rank == (len(self.plan.stages) - 1) % pp
        # return_outputs=False: the last stage would otherwise keep every micro-batch's logits in
        # ``output_chunks`` for the whole step and concatenate them after the last backward (torch 2.13
        # pipelining/stage.py ``forward_one_chunk``, schedules.py ``step``); the losses are all we read
        self.schedule.step(*args, target=labels if last else None, losses=losses if last else None, return_outputs=False)
        return torch.stack([x.detach() for x in losses]).mean() if last else None

    def _mean_loss(self, loss: torch.Tensor | None) -> float:
        """Average over the ranks that computed a loss (the last pipeline rank's dp x cp x tp)."""
        value = torch.zeros((), device=self.device) if loss is None else _plain(loss.detach()).float().reshape(())
        dist.all_reduce(value)
        return float(value) / (dist.get_world_size() // self.mesh.pp)


def _vocab_sharded_loss(loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], tp_mesh: Any,
                        logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``loss_fn`` on the last pipeline stage's local vocabulary shard of the logits, under ``loss_parallel``.

    A ``PipelineStage`` hands its output to the schedule's loss as it left the stage: the head's
    local shard (``Shard(-1)`` over tp, :mod:`~planner.runtime.tensor_parallel`). It is wrapped back
    into a DTensor so that torch's vocab-parallel cross-entropy (``loss_parallel``, active around the
    whole schedule step, backward included) never gathers the full vocabulary; the replicated loss
    leaves as a plain tensor for the schedule, a copy rather than a view of the DTensor's local
    tensor: the zero-bubble schedule's input-gradient backward (``stage_backward_input`` in
    torch/distributed/pipelining/_backward.py) detaches the stage output in place, which a view refuses."""
    from torch.distributed.tensor import DTensor, Shard

    sharded = DTensor.from_local(logits, tp_mesh, [Shard(-1)], run_check=False)
    loss = loss_fn(sharded, labels)
    return loss.to_local().clone() if isinstance(loss, DTensor) else loss


def _plain(t: torch.Tensor) -> torch.Tensor:
    """A replicated DTensor (a loss under ``loss_parallel``) as a plain tensor."""
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def _device(device_type: str | None) -> torch.device:
    if device_type is None:
        device_type = "cuda" if torch.cuda.is_available() and dist.get_backend() == "nccl" else "cpu"
    if device_type == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device(device_type)


def preflight(plan: Plan, module: nn.Module, world_size: int, device_type: str) -> LayerMap:
    """Every check :func:`apply` makes before touching a process group: the device can run the plan,
    the plan's layers match the module, tied weights are not split, the world has the plan's ranks,
    the sequence shards over cp, and a plan in fp8 runs on a GPU that trains Float8
    (:func:`planner.runtime.fp8.check_fp8`)."""
    if plan.config.precision == "fp8":
        from planner.runtime.fp8 import check_fp8

        check_fp8(device_type)
    lmap = map_layers(module, plan)
    m = plan.mesh
    check_context_parallel(m.cp, plan.request.seq_len, m.tp, m.sp, reads_tokens(module, lmap.units[0].path))
    product = plan.config.num_gpus
    if product != world_size:
        m = plan.mesh
        raise InputError(f"plan needs pp {m.pp} x dp {m.dp} x cp {m.cp} x tp {m.tp} = {product} processes, "
                         f"the world has {world_size}; launch with --nproc-per-node {product}")
    return lmap


def apply(plan: Plan, module: nn.Module, *, device_type: str | None = None, optimizer: Optimizer | None = None,
          loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
          precision: RunPrecision | None = None) -> Runtime:
    """Apply ``plan`` to ``module`` on the initialised default process group; see the module docstring.

    ``module`` is the unsplit model (any device, ``meta`` included) whose forward maps token ids
    (batch, seq) to logits (batch, seq, vocab) as the chain of the plan's layers, or, when its first
    layer is no embedding table, features to outputs, trained by default on the mean squared error
    (:mod:`~planner.runtime.tasks`; the head's output is then gathered over tp). Raises InputError
    (one line) when the plan does not match the module or the world. ``precision`` defaults to the
    plan's (:func:`~planner.runtime.precision.plan_precision`: bf16 compute with fp32 master weights
    through FSDP2's mixed precision, on every plan, ``dp = 1`` included); ``optimizer`` to AdamW,
    fused on CUDA.
    """
    if not dist.is_initialized():
        raise InputError("planner.apply needs an initialised process group: start under torchrun and call "
                         "torch.distributed.init_process_group() first")
    device = _device(device_type)
    precision = precision or plan_precision(plan, device.type)
    lmap = preflight(plan, module, dist.get_world_size(), device.type)
    pmesh = build_mesh(plan, device.type, dist.get_world_size())
    tokens = reads_tokens(module, lmap.units[0].path)
    tied: list = []
    if lmap.tied and (pmesh.tp > 1 or pmesh.pp > 1):
        from planner.runtime.tied import untie

        module, tied = untie(module, lmap)
    if precision.fp8:  # torchao Float8 linears in the blocks, before TP and FSDP2 (torchtitan's order)
        from planner.runtime.fp8 import convert_blocks

        convert_blocks(module, [u.path for u in lmap.units if u.kind == "block"])
    pp_rank = pmesh.coordinate("pp")
    chunks = local_chunks(plan.mesh.pp, plan.schedule.virtual_stages, pp_rank)
    stages = build_stages(module, lmap, [(plan.stages[k].layers, list(plan.stages[k].layer_recompute)) for k in chunks])
    if pmesh.cp > 1:
        shard_positions(stages, (pmesh.cp, pmesh.coordinate("cp")))
    loss_parallel = pmesh.tp > 1 and tokens
    if pmesh.tp > 1:
        from planner.runtime.tensor_parallel import apply_tensor_parallel

        for stage in stages:
            apply_tensor_parallel(stage, pmesh.mesh["tp"], sp=plan.mesh.sp, loss_parallel=loss_parallel,
                                  local_logits=pmesh.pp > 1)
    if pmesh.ep > 1:
        from planner.runtime.expert_parallel import shard_experts

        shard_experts(stages, pmesh)
    compiled = 0
    if plan.config.compile:  # per block, after TP and checkpointing, before FSDP2 (torchtitan's order)
        from planner.runtime.compile import compile_blocks

        compiled = compile_blocks(stages)
    if pmesh.dp * pmesh.cp > 1 or precision.mixed:  # FSDP2 casts to the compute dtype: a one-rank shard mesh when dp = 1
        from planner.runtime.fsdp import apply_fsdp

        for stage in stages:
            apply_fsdp(stage, pmesh.dp_mesh(), zero=plan.mesh.zero, tied=lmap.tied and not tied,
                       expert_mesh=pmesh.expert_dp_mesh(), mp_policy=mp_policy(precision))
    runtime = Runtime(plan=plan, mesh=pmesh, layers=lmap, stages=stages, chunks=chunks, device=device,
                      loss_parallel=loss_parallel, make_optimizer=optimizer or make_optimizer(device),
                      loss_fn=loss_fn or (next_token_loss if tokens else regression_loss), tied=tied,
                      precision=precision, compiled=compiled)
    if tied:
        from planner.runtime.tied import tied_group

        runtime.tied_group = tied_group(pmesh.pp)
    if pmesh.pp > 1:
        from planner.runtime.pipeline import build_schedule

        loss = runtime.loss_fn if not loss_parallel else partial(_vocab_sharded_loss, runtime.loss_fn, pmesh.mesh["tp"])
        runtime.schedule = build_schedule(plan.schedule.name, stages, chunks, len(plan.stages), pmesh.mesh["pp"], device,
                                          plan.schedule.num_microbatches, loss)
    return runtime
