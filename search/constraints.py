"""The user's constraints inside the search: which recompute modes remain, and, when no configuration
satisfies them, the configuration of the unconstrained space that comes closest.

The mesh, micro-batch, schedule, SP and ZeRO constraints filter the space where it is enumerated
(``search.space``); recomputation is chosen after enumeration (uniform modes in ``search.core``,
per-layer in ``search.refine``), so its constraint is applied there through :func:`recompute_modes`.
"""

from __future__ import annotations

import math
from dataclasses import replace

from costmodel.specs import ClusterSpec, ModelSpec
from search.space import Option, meshes, options
from search.types import Constraints, SearchRequest

MODES = ("none", "selective", "full")
_INT_DIMS = ("tp", "pp", "cp", "dp", "ep", "vpp", "zero", "micro_batch")


def recompute_modes(constraints: Constraints, allowed: tuple[str, ...] = MODES) -> tuple[str, ...]:
    """Recompute modes every layer may take: the fixed one, or all the target has (``allowed``)."""
    return (constraints.recompute,) if constraints.recompute else tuple(m for m in MODES if m in allowed)


def describe(constraints: Constraints) -> str:
    """The constraints as the command line spells them, e.g. ``tp 2, pp 1..4, recompute none``."""
    out = []
    for name in _INT_DIMS:
        want = getattr(constraints, name)
        if want is not None:
            lo, hi = want
            value = str(lo) if lo == hi else f"{lo}..{'' if hi is None else hi}"
            out.append(f"{name.replace('_', '-')} {value}")
    if constraints.sp is not None:
        out.append("sp" if constraints.sp else "no-sp")
    out += [f"{name} {getattr(constraints, name)}" for name in ("recompute", "schedule") if getattr(constraints, name)]
    return ", ".join(out)


def violations(option: Option, constraints: Constraints) -> list[str]:
    """The constraints ``option`` breaks, each as ``pp 8 (asked 1..4)``."""
    out = []
    for name in (*_INT_DIMS, "sp", "schedule"):
        value = getattr(option, name)
        if not constraints.allows(name, value):
            asked = describe(Constraints(**{name: getattr(constraints, name)}))
            shown = ("sp" if value else "no-sp") if name == "sp" else f"{name.replace('_', '-')} {value}"
            out.append(f"{shown} (asked {asked})")
    return out


def closest_unconstrained(model: ModelSpec, cluster: ClusterSpec, req: SearchRequest) -> tuple[Option, list[str]] | None:
    """The option of the unconstrained space that breaks the fewest constraints, and among those the
    one nearest to the asked ranges (summed distance in doublings; the space's order breaks ties),
    with what it breaks; None when even the unconstrained space is empty."""
    free = replace(req, constraints=Constraints())
    best: tuple[tuple[int, float], Option, list[str]] | None = None
    for mesh in meshes(model, cluster, free):
        for option in options(model, cluster, mesh, free):
            broken = violations(option, req.constraints)
            key = (len(broken), _distance(option, req.constraints))
            if best is None or key < best[0]:
                best = (key, option, broken)
    return None if best is None else (best[1], best[2])


def _distance(option: Option, constraints: Constraints) -> float:
    """How far ``option``'s integer dimensions lie outside their ranges, in doublings (log2)."""
    total = 0.0
    for name in _INT_DIMS:
        want, value = getattr(constraints, name), getattr(option, name)
        if want is None or constraints.allows(name, value):
            continue
        edge = want[0] if value < want[0] else want[1]
        total += abs(math.log2((value + 1) / (edge + 1)))  # +1: zero stages start at 0
    return total


def option_summary(x: Option) -> str:
    """One line naming an option's shape (as ``planner.plans.build.summary`` names a configuration)."""
    sched = x.schedule + (f" v{x.vpp}" if x.vpp > 1 else "")
    return (f"tp {x.tp} x pp {x.pp} x cp {x.cp} x dp {x.dp} (ep {x.ep}), {'sp, ' if x.sp else ''}zero {x.zero}, "
            f"{sched}, micro-batch {x.micro_batch}")
