"""One model chunk: the plan's layers of one pipeline stage, called in order.

A :class:`StageModule` holds the model (``root``; a copy with the other stages' layers removed
when the model is pipelined, so parameter names stay those of the unsplit model under ``root.``)
and calls its units one after the other (:mod:`planner.runtime.layers`); each unit's forward runs
under the plan's recomputation for that layer (:mod:`planner.runtime.recompute`). This is the chunk that FSDP2
shards and ``torch.distributed.pipelining.PipelineStage`` runs.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from planner.runtime.context_parallel import local_positions
from planner.runtime.layers import LayerMap, LayerUnit
from planner.runtime.recompute import apply_recompute

ROOT = "root."
"""Prefix of the unsplit model's names inside a stage module."""


class StageModule(nn.Module):
    """Layers ``units`` of ``root``, run as a chain."""

    def __init__(self, root: nn.Module, units: list[LayerUnit], recompute: list[str], rotary_path: str | None) -> None:
        super().__init__()
        self.root = root
        self.units = list(units)
        self.recompute = list(recompute)
        self.rotary_path = rotary_path
        self.seq_shards = 1
        """Sequence shards of the hidden state between layers (tp under sequence parallelism)."""
        self.position_mesh = None
        """The tp mesh when the sum of token and position tables is scattered over the sequence (SP)."""
        self.cp_shard = (1, 0)
        """(cp, cp rank): positions of the local tokens under context parallelism
        (:func:`planner.runtime.context_parallel.local_positions`)."""

    def layer(self, unit: LayerUnit) -> nn.Module:
        """The module of ``unit``."""
        return self.root.get_submodule(unit.path)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for unit in self.units:
            module = self.layer(unit)
            if unit.positions:
                h = _PositionCall(module, [self.root.get_submodule(p) for p in unit.positions], self.position_mesh,
                                  self.cp_shard)(h)
            elif unit.wants_rotary:
                h = _RotaryCall(module, self.root.get_submodule(self.rotary_path or ""), self.seq_shards, self.cp_shard)(h)
            else:
                h = _Call(module)(h)
        return h


class _Call:
    def __init__(self, module: nn.Module) -> None:
        self.module = module

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        out = self.module(h)
        return out[0] if isinstance(out, tuple) else out


class _RotaryCall(_Call):
    """A Hugging Face decoder layer: ``layer(h, position_embeddings=rotary_emb(h, positions))``."""

    def __init__(self, module: nn.Module, rotary: nn.Module, seq_shards: int, cp_shard: tuple[int, int]) -> None:
        super().__init__(module)
        self.rotary, self.seq_shards, self.cp_shard = rotary, seq_shards, cp_shard

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        positions = local_positions(h.shape[1] * self.seq_shards, *self.cp_shard, h.device).unsqueeze(0)
        out = self.module(h, position_embeddings=self.rotary(h, positions))
        return out[0] if isinstance(out, tuple) else out


class _PositionCall(_Call):
    """A token table plus learned position tables (GPT-2): ``wte(tokens) + wpe(arange(seq))``."""

    def __init__(self, module: nn.Module, tables: list[nn.Module], mesh: object = None,
                 cp_shard: tuple[int, int] = (1, 0)) -> None:
        super().__init__(module)
        self.tables, self.mesh, self.cp_shard = tables, mesh, cp_shard

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        out = super().__call__(h)
        positions = local_positions(h.shape[1], *self.cp_shard, h.device)
        for table in self.tables:
            out = out + table(positions)
        if self.mesh is None:
            return out
        from torch.distributed.tensor import DTensor, Replicate, Shard

        # Sequence parallelism: scatter the replicated sum (backward: all-gather), Megatron's
        # scatter_to_sequence_parallel_region after its embedding (megatron/core/models/common/embeddings).
        full = DTensor.from_local(out, self.mesh, [Replicate()], run_check=False)
        return full.redistribute(self.mesh, [Shard(1)]).to_local()


def _drop(root: nn.Module, path: str) -> None:
    parent_path, _, name = path.rpartition(".")
    parent = root.get_submodule(parent_path) if parent_path else root
    parent._modules[name] = None


def build_stages(module: nn.Module, lmap: LayerMap, chunks: list[tuple[list[int], list[str]]]) -> list[StageModule]:
    """One StageModule per ``(layers, layer_recompute)`` chunk of this rank. With one chunk holding
    every layer the module itself is used; otherwise each chunk gets a copy (cheap on ``meta``)
    without the other layers."""
    everything = len(chunks) == 1 and len(chunks[0][0]) == len(lmap.units)
    stages = []
    for layers, recompute in chunks:
        root = module if everything else copy.deepcopy(module)
        keep = set(layers)
        for unit in lmap.units:
            if unit.index not in keep:
                for path in (unit.path, *unit.positions):
                    _drop(root, path)
        stage = StageModule(root, [lmap.units[i] for i in layers], recompute, lmap.rotary_path)
        for unit, mode in zip(stage.units, recompute):
            apply_recompute(stage.layer(unit), mode)
        stages.append(stage)
    return stages
