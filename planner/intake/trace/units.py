"""Split a module tree into layer units, and find the repeated ones.

A *unit* is the module whose work becomes one layer of the plan: a transformer-like block, an element
of a sequence container (a ResNet bottleneck, a ViT block), an embedding table (or a container of
tables, DLRM-style), or a leaf module (a Linear, a convolution, a norm). Containers that are none of
these (the root, ``model``, ``encoder``) are split into their children. Parameter-free leaves
(activations, pooling, dropout, rotary tables) are *light*: their ops join the layer that ran before
them, like the code written directly in a container's ``forward`` (glue).

Units with the same class and the same parameter and buffer shapes form a *repeat group*; the tracer
runs one of them and reuses the result for the others (see :mod:`planner.intake.trace.stubs`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from planner.intake.trace.layout import stated_layout

UnitKind = Literal["block", "element", "tables", "embedding", "leaf"]

_ATTENTION_NAME = re.compile(r"attn|attention", re.IGNORECASE)
_SEQUENCES = (nn.ModuleList, nn.Sequential)
_CONTAINERS = (nn.ModuleList, nn.ModuleDict, nn.Sequential)


@dataclass(frozen=True)
class Unit:
    """One layer unit of the module tree."""

    path: str
    """Canonical module path (first name in ``named_modules``; ``""`` is the root)."""
    kind: UnitKind
    light: bool
    """A parameter-free leaf: its ops are glue for the neighbouring layer."""
    group: int
    """Repeat group id (units with equal :func:`module_signature`); -1 when the unit is unique."""


@dataclass
class UnitMap:
    """The unit decomposition of one model, and path look-ups into it."""

    root: nn.Module
    units: dict[str, Unit]
    modules: dict[str, nn.Module]
    """Canonical path -> module, for every module of the tree."""
    aliases: dict[str, str]
    """Every name a module is reachable under (shared modules have several) -> canonical path."""
    _resolved: dict[str, Unit | None] = field(default_factory=dict)

    def resolve(self, path: str) -> Unit | None:
        """The innermost unit that holds the module at ``path`` (any alias), or None (container glue)."""
        hit = self._resolved.get(path, False)
        if hit is not False:
            return hit  # type: ignore[return-value]
        canonical = self.aliases.get(path, path)
        probe = canonical
        unit: Unit | None = None
        while True:
            if probe in self.units:
                unit = self.units[probe]
                break
            if not probe:
                break
            probe = probe.rpartition(".")[0]
        self._resolved[path] = unit
        return unit

    def groups(self) -> dict[int, list[str]]:
        """Repeat groups with two or more members: group id -> unit paths in module order."""
        out: dict[int, list[str]] = {}
        for unit in self.units.values():
            if unit.group >= 0:
                out.setdefault(unit.group, []).append(unit.path)
        return out


def linear_dims(module: nn.Module) -> tuple[int, int] | None:
    """(in, out) features of a Linear-like leaf, or None.

    ``nn.Linear``; Hugging Face ``Conv1D`` (GPT-2: weight stored in x out); any other leaf holding a
    2-D ``weight`` used as a projection (MoE routers such as ``MixtralTopKRouter``: out x in).
    """
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    weight = module._parameters.get("weight")
    if weight is None or weight.ndim != 2 or next(module.children(), None) is not None:
        return None
    if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
        return None
    if type(module).__name__ == "Conv1D":
        return int(weight.shape[0]), int(weight.shape[1])
    return int(weight.shape[1]), int(weight.shape[0])


def norm_kind(module: nn.Module) -> Literal["layernorm", "rmsnorm"] | None:
    """``layernorm`` / ``rmsnorm`` for a normalisation over the hidden size, else None.

    ``nn.LayerNorm`` and ``nn.RMSNorm`` by type; any other leaf whose class name contains "norm"
    (``LlamaRMSNorm``, ``T5LayerNorm``) with a 1-D weight. A weight-only norm is costed as RMSNorm
    and one with a bias as LayerNorm: that is what decides its parameters (``costmodel.flops``), and
    the two cost the same memory-bound pass. Batch/group norms (weights per channel) are not these.
    """
    if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.GroupNorm)):
        return None
    weight = module._parameters.get("weight")
    if weight is None or weight.ndim != 1 or next(module.children(), None) is not None:
        return None
    is_norm = isinstance(module, (nn.LayerNorm, nn.RMSNorm)) or "norm" in type(module).__name__.lower()
    if not is_norm:
        return None
    return "layernorm" if module._parameters.get("bias") is not None else "rmsnorm"


def is_table(module: nn.Module) -> bool:
    """An embedding table read by index."""
    return isinstance(module, (nn.Embedding, nn.EmbeddingBag))


def _is_table_group(module: nn.Module) -> bool:
    """A ModuleList / ModuleDict of two or more embedding tables (DLRM's sparse features)."""
    if not isinstance(module, (nn.ModuleList, nn.ModuleDict)):
        return False
    children = list(module.children())
    return len(children) >= 2 and all(is_table(c) for c in children)


def count_params(module: nn.Module) -> int:
    """Parameters of ``module`` (shared tensors counted once)."""
    return sum(p.numel() for p in module.parameters())


def attention_modules(block: nn.Module) -> list[tuple[str, nn.Module]]:
    """Outermost attention submodules of ``block``: ``nn.MultiheadAttention``, or a module whose own
    name contains "attn" / "attention" holding at least two Linear-like projections."""
    found: list[tuple[str, nn.Module]] = []
    for name, module in block.named_modules():
        if not name or any(name.startswith(f"{prefix}.") for prefix, _ in found):
            continue
        if isinstance(module, nn.MultiheadAttention):
            found.append((name, module))
            continue
        own = name.rpartition(".")[2]
        if _ATTENTION_NAME.search(own) and _count_linears(module) >= 2:
            found.append((name, module))
    return found


def _count_linears(module: nn.Module) -> int:
    return sum(1 for m in module.modules() if linear_dims(m) is not None)


def looks_like_block(module: nn.Module) -> bool:
    """A transformer-like block: an attention submodule plus at least two projections outside it
    (an MLP), or an expert container."""
    attn = attention_modules(module)
    if not attn:
        return False
    inside = {id(m) for _, a in attn for m in a.modules()}
    outside = [m for m in module.modules() if id(m) not in inside and linear_dims(m) is not None]
    has_experts = any(p.ndim == 3 for p in module.parameters())
    return len(outside) >= 2 or has_experts


def module_signature(module: nn.Module) -> tuple:
    """What makes two units interchangeable: class, parameter and buffer shapes, submodule classes,
    and the attention layout the unit states (:mod:`planner.intake.trace.layout`: a sliding-window
    layer of Gemma 3 is not traced for its global layers)."""
    params = tuple((n, tuple(p.shape), p.dtype) for n, p in module.named_parameters())
    buffers = tuple((n, tuple(b.shape), b.dtype) for n, b in module.named_buffers())
    kinds = tuple(type(m).__qualname__ for m in module.modules())
    return (type(module).__qualname__, params, buffers, kinds, stated_layout(module))


def _classify(module: nn.Module, parent: nn.Module | None, blocks: set[int], holders: set[int]) -> UnitKind | None:
    """The unit kind of ``module``, or None for a container to split into its children (a sequence
    element holding blocks, as a Swin stage holds its Swin blocks, is split too)."""
    if next(module.children(), None) is None:
        return "embedding" if is_table(module) else "leaf"
    if _is_table_group(module):
        return "tables"
    if id(module) in blocks:
        return "block"
    if isinstance(parent, _SEQUENCES) and next(module.parameters(), None) is not None and id(module) not in holders:
        return "element"
    return None


def _innermost_blocks(root: nn.Module) -> tuple[set[int], set[int]]:
    """Ids of block-like modules holding no smaller block-like module (a model, or its ``layers``
    list, holds attention too, but it is not one block), and ids of the modules holding them. A
    container (ModuleList, ModuleDict, Sequential) is never the block itself: the module owning it is."""
    blocks: set[int] = set()
    nested: dict[int, bool] = {}

    def walk(module: nn.Module) -> bool:
        inner = False
        for child in module.children():
            inner = walk(child) or inner
        if id(module) in nested:
            return nested[id(module)]
        if not inner and looks_like_block(module):
            if isinstance(module, _CONTAINERS):
                return False  # a list of sublayers (T5's ``layer``): its owner is the block
            blocks.add(id(module))
            inner = True
        nested[id(module)] = inner
        return inner

    walk(root)
    return blocks, {key for key, inner in nested.items() if inner and key not in blocks}


def find_units(root: nn.Module) -> UnitMap:
    """Decompose ``root`` into units (top-down, stopping at the first module that is a unit)."""
    modules: dict[str, nn.Module] = {}
    canonical: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for name, module in root.named_modules(remove_duplicate=False):
        first = canonical.setdefault(id(module), name)
        modules.setdefault(first, module)
        aliases[name] = first
    units: dict[str, Unit] = {}
    signatures: dict[tuple, int] = {}
    members: dict[int, list[str]] = {}
    blocks, holders = _innermost_blocks(root)

    def visit(path: str, module: nn.Module, parent: nn.Module | None) -> None:
        kind = _classify(module, parent, blocks, holders)
        if kind is None:
            for child_name, child in module.named_children():
                child_path = f"{path}.{child_name}" if path else child_name
                if canonical[id(child)] == child_path:
                    visit(child_path, child, module)
            return
        light = kind == "leaf" and next(module.parameters(), None) is None
        group = -1
        if kind in ("block", "element"):
            group = signatures.setdefault(module_signature(module), len(signatures))
            members.setdefault(group, []).append(path)
        units[path] = Unit(path=path, kind=kind, light=light, group=group)

    visit("", root, None)
    for group, paths in members.items():
        if len(paths) < 2:
            for path in paths:
                unit = units[path]
                units[path] = Unit(path=unit.path, kind=unit.kind, light=unit.light, group=-1)
    return UnitMap(root=root, units=units, modules=modules, aliases=aliases)


def tensor_leaves(tree: object) -> list[torch.Tensor]:
    """Tensors in a nested structure of tuples, lists and dicts (pytree order)."""
    from torch.utils import _pytree as pytree

    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]
