"""A heterogeneous plan's replicas as the search's specs (what ``estimate --plan`` re-prices)."""

from __future__ import annotations

from planner.plans.hetero.schema import HeteroInfo
from search.hetero.types import ReplicaSpec


def specs_of(info: HeteroInfo) -> list[ReplicaSpec]:
    """The replicas a plan's ``hetero`` section states, as the search's specs."""
    out = []
    for r in info.replicas:
        sizes = tuple(len(s.layers) for s in r.stages)
        out.append(ReplicaSpec(tuple(tuple(s.devices) for s in r.stages), sizes if len(sizes) > 1 else None,
                               r.micro_batches, r.recompute))
    return out
