"""Tensor and sequence parallelism with DTensor (``torch.distributed.tensor.parallel``).

The Megatron-LM split (Shoeybi et al. 2019, section 3) as torchtitan writes it
(``torchtitan/models/llama3/infra/parallelize.py``, ``apply_tp``):

- in each block, the projections the tracer calls column-parallel (attention Q/K/V, MLP up/gate:
  the inputs of a block's attention module and of its MLP) get ``ColwiseParallel``, those reading
  one input reducing its gradient once (:mod:`~planner.runtime.column_group`), the ones it
  calls row-parallel (attention output, MLP down: the last projection of the attention module, the
  MLP projection back to the hidden size) get ``RowwiseParallel``; Hugging Face modules reshape
  with ``-1`` heads, so local heads follow;
- the token embedding is vocab-split (Megatron-LM's ``VocabParallelEmbedding``): an ``nn.Embedding``
  with ``RowwiseParallel``; the runtime's preset :class:`~planner.runtime.models.Embedding` (token
  plus optional position table) with :class:`VocabParallelTables`, which shards the token table by
  rows and lets DTensor's embedding rule mask the other ranks' ids and sum the partial rows; a
  position table stays replicated; other composite embeddings stay replicated;
- the head is ``ColwiseParallel``; its logits stay vocab-sharded for ``loss_parallel`` (Megatron-LM's
  vocab-parallel cross-entropy): a DTensor without pipelining, the local shard on a pipeline's last
  stage, which :mod:`planner.runtime.apply` wraps back into a DTensor inside the schedule's loss;
- with sequence parallelism (Korthikanti et al. 2022, section 4.2.2) the residual stream between
  layers is sharded on the sequence dimension: block norms run as ``SequenceParallel`` and their
  output is gathered (``PrepareModuleOutput``) for the column projections, row projections
  reduce-scatter (``output_layouts=Shard(1)``), the embedding scatters and the final norm runs
  sequence-sharded; a mixture-of-experts module takes the gathered sequence and keeps its own chunk
  of the output (:func:`_moe_modules`). Blocks without norms gather their input and scatter their output;
- units that are no transformer block (no attention submodule: a convolution block, an MLP element
  of a model without tokens) are replicated over tp, gathered around under sequence parallelism:
  every tp rank computes them whole (the plan's cost model may split such a layer's Linear
  projections by ``tp_mode``; the runtime does not), and so is the head of a model trained without
  a vocabulary-parallel loss (a model without tokens, :mod:`~planner.runtime.tasks`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_module, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)
from torch.distributed.tensor.parallel.style import ParallelStyle

from planner.errors import InputError
from planner.intake.trace.units import attention_modules
from planner.runtime.column_group import GroupedColwise, mark_gathered
from planner.runtime.layers import LayerUnit
from planner.runtime.stage import StageModule


class VocabParallelTables(ParallelStyle):
    """Vocab-split ``token_weight`` (``Shard(0)``), replicated ``position_weight``, replicated token ids in,
    ``output_layout`` out (``Replicate()``, or ``Shard(1)`` under sequence parallelism) as a local tensor.

    The module's own ``F.embedding(tokens, token_weight)`` on DTensors runs torch's vocab-parallel
    embedding rule (``torch/distributed/tensor/_ops/_embedding_ops.py``: ids outside this rank's rows
    are masked, the partial rows summed when the output is redistributed), as ``RowwiseParallel`` does
    for an ``nn.Embedding``."""

    def __init__(self, output_layout: Shard | Replicate) -> None:
        super().__init__()
        self.output_layout = output_layout

    @staticmethod
    def _partition(name: str, module: nn.Module, mesh: DeviceMesh) -> None:
        for pname, param in list(module.named_parameters(recurse=False)):
            placement = Shard(0) if pname == "token_weight" else Replicate()
            module.register_parameter(pname, nn.Parameter(distribute_tensor(param, mesh, [placement])))

    @staticmethod
    def _input(module: nn.Module, inputs: tuple[Any, ...], mesh: DeviceMesh) -> tuple[Any, ...]:
        tokens = inputs[0]
        if not isinstance(tokens, DTensor):
            tokens = DTensor.from_local(tokens, mesh, [Replicate()], run_check=False)
        return (tokens, *inputs[1:])

    def _output(self, module: nn.Module, out: DTensor, mesh: DeviceMesh) -> torch.Tensor:
        return out.redistribute(mesh, [self.output_layout]).to_local()

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        return distribute_module(module, device_mesh, self._partition, self._input, self._output)  # type: ignore[arg-type]


def block_roles(block: nn.Module) -> tuple[dict[str, str], list[str], int]:
    """({linear path: "column" | "row"}, norm paths over the hidden size, hidden size) of a block."""
    from planner.intake.trace.units import attention_modules, norm_kind

    linears = [(n, m) for n, m in block.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        return {}, [], 0
    roles: dict[str, str] = {}
    attn = attention_modules(block)
    hidden = 0
    for name, module in attn:
        inner = [f"{name}.{n}" for n, m in module.named_modules() if isinstance(m, nn.Linear)]
        roles.update({p: "column" for p in inner[:-1]})
        roles[inner[-1]] = "row"
        hidden = block.get_submodule(inner[-1]).out_features
    hidden = hidden or linears[0][1].in_features
    for name, lin in linears:
        if name in roles:
            continue
        if lin.out_features == hidden and lin.in_features != hidden:
            roles[name] = "row"
        elif lin.in_features == hidden and lin.out_features != hidden:
            roles[name] = "column"
    norms = [n for n, m in block.named_modules() if norm_kind(m) is not None and m.weight.numel() == hidden]
    return roles, norms, hidden


def _block_plan(unit: LayerUnit, block: nn.Module, tp: int, sp: bool) -> dict[str, object]:
    roles, norms, _ = block_roles(block)
    plan: dict[str, object] = {}
    for path, role in roles.items():
        lin = block.get_submodule(path)
        width = lin.out_features if role == "column" else lin.in_features
        if width % tp:
            raise InputError(f"layer {unit.index} ({unit.path}.{path}) has width {width}, not divisible by tp {tp}; plan a tp that divides it")
        if role == "column":
            plan[path] = GroupedColwise()
        else:
            plan[path] = RowwiseParallel(output_layouts=Shard(1) if sp and norms else Replicate())
    return plan


def _apply_block(unit: LayerUnit, block: nn.Module, mesh: DeviceMesh, sp: bool) -> None:
    plan = _block_plan(unit, block, mesh.size(), sp)
    _, norms, _ = block_roles(block)
    if plan:
        parallelize_module(block, mesh, plan)
    if not sp:
        return
    if norms:
        for path in norms:
            norm = block.get_submodule(path)
            parallelize_module(norm, mesh, SequenceParallel())
            parallelize_module(norm, mesh, PrepareModuleOutput(output_layouts=Shard(1), desired_output_layouts=Replicate()))
            norm.register_forward_hook(lambda _m, _args, out: mark_gathered(out))
        for moe in _moe_modules(block):  # the gathered sequence in, this rank's sequence chunk out
            parallelize_module(moe, mesh, PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(1)))
    else:
        _gather_around(block, mesh)


def _moe_modules(block: nn.Module) -> list[nn.Module]:
    """The mixture-of-experts modules of ``block``: each parent of a fused-experts module (router and
    experts, Hugging Face's ``MixtralSparseMoeBlock`` and its kin).

    Under sequence parallelism they run as Megatron-LM's MoE layer does without expert-tensor
    parallelism when its token dispatcher is ``allgather`` (``MoEAllGatherTokenDispatcher``,
    megatron/core/transformer/moe/token_dispatcher.py): the block norm's gathered output is the
    whole sequence, every tp rank routes and computes every token with the replicated router and
    experts (or dispatches them over its EP group), and keeps its own sequence chunk of the output
    for the residual stream, whose backward all-gathers the chunk gradients, so the replicated
    weights' gradients are the same on every tp rank and need no reduction."""
    from planner.runtime.expert_parallel import is_experts

    return [m for m in block.modules() if any(is_experts(c) for c in m.children())]


def _gather_around(module: nn.Module, mesh: DeviceMesh) -> None:
    """Sequence-sharded in and out, whole sequence inside (no comm on the way out)."""
    parallelize_module(module, mesh, PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),), use_local_output=True))
    module.register_forward_pre_hook(lambda _m, args: mark_gathered(args))
    parallelize_module(module, mesh, PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(1)))


def _apply_embedding(module: nn.Module, mesh: DeviceMesh, sp: bool) -> None:
    """Vocab-split an ``nn.Embedding`` or the preset embedding; other embeddings stay replicated."""
    from planner.runtime.models import Embedding

    out = Shard(1) if sp else Replicate()
    if isinstance(module, (nn.Embedding, Embedding)):
        vocab = module.num_embeddings if isinstance(module, nn.Embedding) else module.token_weight.shape[0]
        if vocab % mesh.size():
            raise InputError(f"vocabulary {vocab} is not divisible by tp {mesh.size()}; pad the vocabulary or plan another tp")
        style = RowwiseParallel(input_layouts=Replicate(), output_layouts=out) if isinstance(module, nn.Embedding) else VocabParallelTables(out)
        parallelize_module(module, mesh, style)
    elif sp:
        parallelize_module(module, mesh, PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(1)))


def apply_tensor_parallel(stage: StageModule, mesh: DeviceMesh, *, sp: bool, loss_parallel: bool,
                          local_logits: bool = False) -> None:
    """Parallelize every layer of ``stage`` over the ``tp`` mesh (see the module docstring). With
    ``loss_parallel`` the head's logits stay vocab-sharded: a DTensor, or (``local_logits``, for a
    pipeline stage, whose outputs the schedule hands on as they are) this rank's plain shard."""
    tp = mesh.size()
    for unit in stage.units:
        module = stage.layer(unit)
        if unit.kind == "embedding":
            _apply_embedding(module, mesh, sp and not unit.positions)  # position tables: scattered after the sum
            stage.position_mesh = mesh if sp and unit.positions else None
        elif unit.kind == "block" and attention_modules(module):
            _apply_block(unit, module, mesh, sp)
        elif unit.kind == "norm" and sp:
            parallelize_module(module, mesh, SequenceParallel(use_local_output=True))
        elif unit.kind == "head" and loss_parallel:
            if module.out_features % tp:
                raise InputError(f"head width {module.out_features} is not divisible by tp {tp}; pad the vocabulary or plan another tp")
            style = ColwiseParallel(input_layouts=Shard(1) if sp else Replicate(),
                                    output_layouts=Shard(-1) if loss_parallel else Replicate(),
                                    use_local_output=local_logits or not loss_parallel)
            parallelize_module(module, mesh, style)
        elif sp:
            _gather_around(module, mesh)
    stage.seq_shards = tp if sp else 1
