"""Map a plan's ordered layer list back to the modules of a torch model.

The plan numbers a model's layers in execution order: embedding, transformer blocks (or other
units), final norm, head (``planner.plans.schema.ModelInfo.layer_names``). The tracer decomposes a
module tree into the same units (:func:`planner.intake.trace.units.find_units`): embedding tables, blocks
(an attention submodule plus an MLP), elements of a ``ModuleList`` / ``Sequential``, and leaves
(a norm, a Linear head). Parameter-free leaves (rotary tables, activations) are glue, not layers.
Here every non-glue unit, in module order, is one plan layer; a module whose unit count or
parameter count differs from the plan is refused with one line naming the mismatch.

The runtime then calls the units one after another (:mod:`planner.runtime.stage`): the model must
be a chain ``head(norm(block_n(...block_1(embedding(tokens)))))``, as decoder language models are.
Hugging Face decoders also get the rotary ``position_embeddings`` their blocks expect, computed by
the model's own ``rotary_emb`` module.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Literal

from torch import nn

from planner.errors import InputError
from planner.plans.schema import Plan

LayerKind = Literal["embedding", "block", "norm", "head", "other"]


@dataclass(frozen=True)
class LayerUnit:
    """One plan layer and the module that computes it."""

    index: int
    """Position in the plan's layer list."""
    path: str
    """Module path inside the model (``model.layers.3``)."""
    kind: LayerKind
    params: int
    wants_rotary: bool = False
    """The module's forward takes ``position_embeddings`` (Hugging Face decoder layers)."""
    positions: tuple[str, ...] = ()
    """Learned position tables added to this embedding's output (GPT-2's ``transformer.wpe``): the
    plan counts token and position tables as one embedding layer."""


@dataclass(frozen=True)
class LayerMap:
    """The plan's layers as module paths, and the glue modules the chain needs."""

    units: tuple[LayerUnit, ...]
    rotary_path: str | None
    """Path of a parameter-free rotary embedding module (``model.rotary_emb``), if any."""
    tied: bool
    """Some parameter is shared between two layers (tied input and output embeddings)."""

    def paths(self, layers: list[int]) -> list[str]:
        """Module paths of plan layers ``layers``."""
        return [self.units[i].path for i in layers]


def _kind(module: nn.Module, unit_kind: str, last: bool) -> LayerKind:
    from planner.intake.trace.units import norm_kind

    if unit_kind in ("embedding", "tables"):
        return "embedding"
    if unit_kind in ("block", "element"):
        return "block"
    if norm_kind(module) is not None:
        return "norm"
    if last and isinstance(module, nn.Linear):
        return "head"
    return "other"


def map_layers(module: nn.Module, plan: Plan) -> LayerMap:
    """Map ``plan``'s layers onto ``module``'s units; InputError naming the first mismatch."""
    from planner.intake.trace.units import find_units

    umap = find_units(module)
    heavy = [u for u in umap.units.values() if not u.light]
    heavy, positions = _position_tables(module, heavy, plan.model.num_layers)
    units: list[LayerUnit] = []
    owners: dict[int, int] = {}
    tied = False
    for i, unit in enumerate(heavy):
        sub = module.get_submodule(unit.path)
        count = 0
        tables = positions if i == 0 else ()
        for p in [*sub.parameters(), *(q for path in tables for q in module.get_submodule(path).parameters())]:
            if id(p) in owners and owners[id(p)] != i:
                tied = True
                continue
            owners[id(p)] = i
            count += p.numel()
        kind = _kind(sub, unit.kind, i == len(heavy) - 1)
        if kind == "other" and i == 0 and unit.kind == "leaf":
            kind = "embedding"  # a leaf holding its own tables (token + position weights)
        wants = "position_embeddings" in inspect.signature(sub.forward).parameters
        units.append(LayerUnit(index=i, path=unit.path, kind=kind, params=count, wants_rotary=wants, positions=tables))
    _check(units, module, plan)
    rotary = next((u.path for u in umap.units.values() if u.light and "rotary" in u.path.rpartition(".")[2].lower()), None)
    if any(u.wants_rotary for u in units) and rotary is None:
        raise InputError("the model's blocks take position_embeddings but no rotary_emb module was found; "
                         "give the model a rotary_emb module as Hugging Face decoders have")
    return LayerMap(units=tuple(units), rotary_path=rotary, tied=tied)


def _position_tables(module: nn.Module, heavy: list, layers: int) -> tuple[list, tuple[str, ...]]:
    """The units without the learned position tables that follow the token table (GPT-2's ``wte``,
    ``wpe``: two ``nn.Embedding`` units, one plan layer), and those tables' paths. Only when the
    module has exactly that many units more than the plan, so that models whose tables are layers of
    their own (DLRM) keep them."""
    lead = 0
    while lead < len(heavy) and isinstance(module.get_submodule(heavy[lead].path), nn.Embedding):
        lead += 1
    extra = len(heavy) - layers
    if lead < 2 or not 0 < extra < lead:
        return heavy, ()
    return [heavy[0], *heavy[extra + 1:]], tuple(u.path for u in heavy[1:extra + 1])


def _check(units: list[LayerUnit], module: nn.Module, plan: Plan) -> None:
    """Layer count and parameter count agree with the plan."""
    names = plan.model.layer_names
    if len(units) != plan.model.num_layers:
        found = ", ".join(u.path for u in units[:8]) + (", ..." if len(units) > 8 else "")
        raise InputError(f"the plan has {plan.model.num_layers} layers ({_span(names)}) but the module has "
                         f"{len(units)} ({found}); apply the plan to the model it was made for ({plan.model.arg})")
    total = sum(p.numel() for p in module.parameters())
    if total != plan.model.params:
        raise InputError(f"the module has {total:,} parameters but the plan's model {plan.model.name!r} has "
                         f"{plan.model.params:,}; apply the plan to the model it was made for ({plan.model.arg})")
    first_block = next((i for i, u in enumerate(units) if u.kind == "block"), None)
    if first_block is not None and units[0].kind != "embedding" and names[0] == "embedding":
        raise InputError(f"plan layer 0 is an embedding but module unit {units[0].path} is not an embedding table")


def _span(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f", ... {names[-1]}" if len(names) > 3 else "")
