"""Tied input embedding and output head, split over tensor and pipeline parallelism.

A model that ties its token table to its head (GPT-2, GPT-3 presets) holds one parameter in two
layers. The runtime unties it before splitting, as Megatron-LM does for pipelines (the last stage
keeps its own copy of the word embeddings, ``LanguageModule.setup_embeddings_and_output_layer``,
megatron/core/models/common/language_module/language_module.py) and sums the two copies' gradients
after every backward (Megatron's ``_allreduce_word_embedding_grads`` over the embedding group: the
first and last pipeline ranks of the same data / tensor coordinates). Both copies start from the
same weights and take the same summed gradient, so AdamW keeps them equal: the step is the tied
model's. Under tensor parallelism the table and the head are both vocabulary-split on dim 0
(:mod:`~planner.runtime.tensor_parallel`), and FSDP2 shards both alike, so their local shards hold
the same rows and are summed element by element.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from planner.runtime.layers import LayerMap


@dataclass(frozen=True)
class TiedPair:
    """One tied parameter: its name in the embedding layer and its name in the head."""

    embedding: str
    head: str


def untie(module: nn.Module, lmap: LayerMap) -> tuple[nn.Module, list[TiedPair]]:
    """A copy of ``module`` whose head owns a parameter of its own wherever it shared the embedding's
    (cheap on ``meta``), and the tied pairs by their names in the unsplit model."""
    emb = next((u for u in lmap.units if u.kind == "embedding"), None)
    head = next((u for u in reversed(lmap.units) if u.kind == "head"), None)
    if emb is None or head is None:
        return module, []
    module = copy.deepcopy(module)
    owners = {id(p): name for name, p in module.get_submodule(emb.path).named_parameters()}
    pairs = []
    for name, p in list(module.get_submodule(head.path).named_parameters()):
        if id(p) in owners:
            owner_path, _, attr = f"{head.path}.{name}".rpartition(".")
            setattr(module.get_submodule(owner_path), attr, nn.Parameter(torch.empty_like(p), requires_grad=p.requires_grad))
            pairs.append(TiedPair(f"{emb.path}.{owners[id(p)]}", f"{head.path}.{name}"))
    return module, pairs


def tied_group(pp: int) -> dist.ProcessGroup | None:
    """This rank's group of the first and last pipeline ranks at its data and tensor coordinates
    (global rank = ... + (world / pp) x pp_rank, :mod:`~planner.runtime.mesh`); every rank creates
    every group, in the same order, as ``new_group`` requires. None without pipelining."""
    if pp == 1:
        return None
    world, rank = dist.get_world_size(), dist.get_rank()
    stride, mine = world // pp, None
    for first in range(stride):
        group = dist.new_group([first, first + (pp - 1) * stride])
        if rank % stride == first:
            mine = group
    return mine


@torch.no_grad()
def sum_tied_grads(params: dict[str, nn.Parameter], pairs: list[TiedPair], group: dist.ProcessGroup | None) -> None:
    """Give both copies of every tied pair the sum of their gradients (``params``: this rank's
    parameters by unsplit name). A rank holding neither copy does nothing."""
    from torch.distributed.tensor import DTensor

    def local(p: nn.Parameter | None) -> torch.Tensor | None:
        if p is None or p.grad is None:
            return None
        if isinstance(p.grad, DTensor) and isinstance(p, DTensor) and p.grad.placements != p.placements:
            p.grad = p.grad.redistribute(p.device_mesh, p.placements)  # the table's Partial full-vocabulary gradient
        return p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad

    for pair in pairs:
        grads = [g for g in (local(params.get(pair.embedding)), local(params.get(pair.head))) if g is not None]
        if len(grads) == 2:  # both copies on this rank
            total = grads[0] + grads[1]
            grads[0].copy_(total)
            grads[1].copy_(total)
        elif grads and group is not None:
            dist.all_reduce(grads[0], group=group)
