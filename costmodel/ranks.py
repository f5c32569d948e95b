"""Sum layer costs into pipeline ranks: chunk k of ``stage_layers`` runs on rank k mod pp (Megatron's
interleaved layout: stage i = a·PP + b is virtual chunk a of rank b; ecosystem-notes B1)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from costmodel.local import LayerCost, LocalConfig
from costmodel.specs import ParallelConfig
from costmodel.table import RECOMPUTE_CODES, CostTable, default_stage_layers

_FIELDS = ("fwd_s", "bwd_s", "recompute_s", "comm_exposed_s", "comm_hidden_s", "act_bytes", "params", "expert_params")
_LINKS = ("tp", "cp", "ep", "dp")


@dataclass(frozen=True)
class RankCost:
    """One pipeline rank, per micro-batch: sums over the layers of all its chunks."""

    chunks: tuple[tuple[int, int], ...]
    """[start, end) layer ranges of the rank's chunks, in chunk order."""
    fwd_s: float
    bwd_s: float
    recompute_s: float
    exposed_s: float
    hidden_s: float
    link_s: dict[str, float]
    act_bytes: float
    work_bytes: float
    params: float
    expert_params: float
    boundary_bytes: float
    """Largest activation the rank sends to the next stage per micro-batch."""
    largest_layer_params: float


def _vector(cost: LayerCost) -> list[float]:
    return [getattr(cost, f) for f in _FIELDS] + [cost.comm_link_s[k] for k in _LINKS]


def layer_keys(table: CostTable, cfg: ParallelConfig) -> np.ndarray:
    """Key of every layer: group·3 + recompute code (layers that cannot recompute use 'none')."""
    if cfg.layer_recompute is not None:
        codes = np.array([RECOMPUTE_CODES.index(x) for x in cfg.layer_recompute])
    else:
        codes = np.full(len(table.layer_group), RECOMPUTE_CODES.index(cfg.recompute))
    return table.layer_group * 3 + np.where(table.recomputable, codes, 0)


def rank_costs(
    table: CostTable, cfg: ParallelConfig, local: Callable[[str], LocalConfig]
) -> tuple[RankCost, ...]:
    """Per-rank sums for ``cfg``; ``local(recompute)`` gives the per-layer view of the config."""
    keys = layer_keys(table, cfg)
    present = np.unique(keys)
    locals_ = {code: local(code) for code in {RECOMPUTE_CODES[k % 3] for k in present}}
    costs = {int(k): table.cost(int(k) // 3, locals_[RECOMPUTE_CODES[k % 3]]) for k in present}
    col = {int(k): i for i, k in enumerate(present)}
    matrix = np.array([_vector(costs[int(k)]) for k in present])
    onehot = np.zeros((len(keys) + 1, len(present)))
    onehot[np.arange(1, len(keys) + 1), [col[int(k)] for k in keys]] = 1.0
    cum = np.cumsum(onehot, axis=0)
    sizes = cfg.stage_layers or default_stage_layers(table.model, cfg.pp * cfg.vpp)
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    chunk_counts = cum[bounds[1:]] - cum[bounds[:-1]]
    chunk_sums = chunk_counts @ matrix
    return tuple(_rank(r, cfg, bounds, chunk_sums, chunk_counts, keys, costs, present) for r in range(cfg.pp))


def _rank(r, cfg, bounds, chunk_sums, chunk_counts, keys, costs, present) -> RankCost:
    idx = list(range(r, cfg.pp * cfg.vpp, cfg.pp))
    total = chunk_sums[idx].sum(axis=0)
    used = [int(present[j]) for j in np.flatnonzero(chunk_counts[idx].sum(axis=0))]
    work = max((costs[k].work_bytes for k in used), default=0.0)
    largest = max((costs[k].params for k in used), default=0.0)
    last_keys = [int(keys[bounds[i + 1] - 1]) for i in idx if bounds[i + 1] > bounds[i]]
    boundary = max((costs[k].out_bytes for k in last_keys), default=0.0)
    n = len(_FIELDS)
    return RankCost(
        chunks=tuple((int(bounds[i]), int(bounds[i + 1])) for i in idx),
        fwd_s=float(total[0]),
        bwd_s=float(total[1]),
        recompute_s=float(total[2]),
        exposed_s=float(total[3]),
        hidden_s=float(total[4]),
        link_s={k: float(total[n + j]) for j, k in enumerate(_LINKS)},
        act_bytes=float(total[5]),
        work_bytes=float(work),
        params=float(total[6]),
        expert_params=float(total[7]),
        boundary_bytes=float(boundary),
        largest_layer_params=float(largest),
    )
