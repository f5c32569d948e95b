"""Tensor and sequence parallelism with DTensor (``torch.distributed.tensor.parallel``).

The Megatron-LM split (Shoeybi et al. 2019, section 3) as torchtitan writes it
(``torchtitan/models/llama3/infra/parallelize.py``, ``apply_tp``):

- in each block, the projections the tracer calls column-parallel (attention Q/K/V, MLP up/gate:
  the inputs of a block's attention module and of its MLP) get ``ColwiseParallel``, the ones it
  calls row-parallel (attention output, MLP down: the last projection of the attention module, the
  MLP projection back to the hidden size) get ``RowwiseParallel``; Hugging Face modules reshape
  with ``-1`` heads, so local heads follow;
- the token embedding (an ``nn.Embedding``) is vocab-split (``RowwiseParallel``); a composite
  embedding (token plus position table) stays replicated;
- the head is ``ColwiseParallel``; its logits stay vocab-sharded for ``loss_parallel`` when the
  head's stage also computes the loss without a pipeline, and are gathered otherwise;
- with sequence parallelism (Korthikanti et al. 2022, section 4.2.2) the residual stream between
  layers is sharded on the sequence dimension: block norms run as ``SequenceParallel`` and their
  output is gathered (``PrepareModuleOutput``) for the column projections, row projections
  reduce-scatter (``output_layouts=Shard(1)``), the embedding scatters and the final norm runs
  sequence-sharded. Blocks without norms gather their input and scatter their output.
"""

from __future__ import annotations

from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from planner.errors import InputError
from planner.runtime.layers import LayerUnit
from planner.runtime.stage import StageModule


def block_roles(block: nn.Module) -> tuple[dict[str, str], list[str], int]:
    """({linear path: "column" | "row"}, norm paths over the hidden size, hidden size) of a block."""
    from planner.trace.units import attention_modules, norm_kind

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
            plan[path] = ColwiseParallel()
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
    else:
        _gather_around(block, mesh)


def _gather_around(module: nn.Module, mesh: DeviceMesh) -> None:
    """Sequence-sharded in and out, whole sequence inside (no comm on the way out)."""
    parallelize_module(module, mesh, PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),), use_local_output=True))
    parallelize_module(module, mesh, PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(1)))


def apply_tensor_parallel(stage: StageModule, mesh: DeviceMesh, *, sp: bool, loss_parallel: bool) -> None:
    """Parallelize every layer of ``stage`` over the ``tp`` mesh (see the module docstring)."""
    tp = mesh.size()
    for unit in stage.units:
        module = stage.layer(unit)
        if unit.kind == "embedding":
            if isinstance(module, nn.Embedding):
                if module.num_embeddings % tp:
                    raise InputError(f"vocabulary {module.num_embeddings} is not divisible by tp {tp}; pad the vocabulary or plan another tp")
                parallelize_module(module, mesh, RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1) if sp else Replicate()))
            elif sp:
                parallelize_module(module, mesh, PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(1)))
        elif unit.kind == "block":
            _apply_block(unit, module, mesh, sp)
        elif unit.kind == "norm" and sp:
            parallelize_module(module, mesh, SequenceParallel(use_local_output=True))
        elif unit.kind == "head":
            if module.out_features % tp:
                raise InputError(f"head width {module.out_features} is not divisible by tp {tp}; pad the vocabulary or plan another tp")
            style = ColwiseParallel(input_layouts=Shard(1) if sp else Replicate(),
                                    output_layouts=Shard(-1) if loss_parallel else Replicate(), use_local_output=not loss_parallel)
            parallelize_module(module, mesh, style)
        elif sp:
            _gather_around(module, mesh)
    stage.seq_shards = tp if sp else 1
