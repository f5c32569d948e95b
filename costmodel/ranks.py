"""Sum layer costs into pipeline ranks: chunk k of ``stage_layers`` runs on rank k mod pp (Megatron's
interleaved layout: stage i = a·PP + b is virtual chunk a of rank b; ecosystem-notes B1).

Every quantity is a numpy array with one entry per pipeline rank, so that the step model works on all
ranks at once (the search calls it millions of times).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from costmodel.local import LayerCost, LocalConfig
from costmodel.specs import ParallelConfig
from costmodel.table import RECOMPUTE_CODES, CostTable

_SUMMED = ("fwd_s", "bwd_s", "recompute_s", "comm_exposed_s", "comm_hidden_s", "act_bytes", "params", "expert_params")
LINKS = ("tp", "cp", "ep", "dp")


@dataclass(frozen=True)
class Ranks:
    """Per pipeline rank, per micro-batch: sums over the layers of all the rank's chunks."""

    chunk_bounds: np.ndarray
    """Layer index where each chunk starts, plus the layer count at the end (pp·vpp + 1 entries)."""
    fwd_s: np.ndarray
    bwd_s: np.ndarray
    recompute_s: np.ndarray
    exposed_s: np.ndarray
    hidden_s: np.ndarray
    act_bytes: np.ndarray
    params: np.ndarray
    expert_params: np.ndarray
    links: dict[str, np.ndarray]
    work_bytes: np.ndarray
    """Largest transient activation of any layer on the rank."""
    largest_layer_params: np.ndarray
    boundary_bytes: np.ndarray
    """Largest activation the rank sends to the next stage per micro-batch."""

    def chunks(self, rank: int, pp: int) -> list[tuple[int, int]]:
        """[start, end) layer ranges of ``rank``'s chunks, in chunk order."""
        b = self.chunk_bounds
        return [(int(b[k]), int(b[k + 1])) for k in range(rank, len(b) - 1, pp)]


def layer_keys(table: CostTable, cfg: ParallelConfig) -> np.ndarray:
    """Key of every layer: group·3 + recompute code (layers that cannot recompute use 'none')."""
    if cfg.layer_recompute is not None:
        codes = np.array([RECOMPUTE_CODES.index(x) for x in cfg.layer_recompute])
    else:
        codes = RECOMPUTE_CODES.index(cfg.recompute)
    return table.layer_group * 3 + np.where(table.recomputable, codes, 0)


def _row(cost: LayerCost) -> list[float]:
    return [getattr(cost, f) for f in _SUMMED] + [cost.comm_link_s[k] for k in LINKS]


def _key_costs(table: CostTable, present: np.ndarray, local: Callable[[str], LocalConfig]) -> tuple[np.ndarray, ...]:
    """(summed-field matrix, work, params, out bytes) of each present key, memoised in the table."""
    codes = sorted({RECOMPUTE_CODES[k % 3] for k in present.tolist()})
    views = {code: local(code) for code in codes}
    memo_key = (present.tobytes(), tuple(views[c] for c in codes))
    hit = table.memo.get(memo_key)
    if hit is None:
        costs = [table.cost(k // 3, views[RECOMPUTE_CODES[k % 3]]) for k in present.tolist()]
        hit = (
            np.array([_row(c) for c in costs]),
            np.array([c.work_bytes for c in costs]),
            np.array([c.params for c in costs]),
            np.array([c.out_bytes for c in costs]),
        )
        table.memo[memo_key] = hit
    return hit


def rank_costs(table: CostTable, cfg: ParallelConfig, local: Callable[[str], LocalConfig]) -> Ranks:
    """Per-rank sums for ``cfg``; ``local(recompute)`` gives the per-layer view of the config."""
    signature = cfg.layer_recompute or cfg.recompute
    present, inverse, cum = table.key_prefix(signature, lambda: layer_keys(table, cfg))
    matrix, work, largest, out = _key_costs(table, present, local)
    sizes = cfg.stage_layers or table.default_split(cfg.pp * cfg.vpp)
    bounds = table.bounds(sizes)
    counts = (cum[bounds[1:]] - cum[bounds[:-1]]).reshape(cfg.vpp, cfg.pp, len(present)).sum(axis=0)
    sums = counts @ matrix
    used = counts > 0
    last_layer = np.maximum(bounds[1:] - 1, 0)
    last = inverse[last_layer].reshape(cfg.vpp, cfg.pp)
    spanning = table.cut_extra_bytes_per_token[last_layer].reshape(cfg.vpp, cfg.pp) * local("none").tokens
    n = len(_SUMMED)
    return Ranks(
        chunk_bounds=bounds,
        **{name: sums[:, i] for i, name in enumerate(_SUMMED[:2])},
        recompute_s=sums[:, 2],
        exposed_s=sums[:, 3],
        hidden_s=sums[:, 4],
        act_bytes=sums[:, 5],
        params=sums[:, 6],
        expert_params=sums[:, 7],
        links={k: sums[:, n + j] for j, k in enumerate(LINKS)},
        work_bytes=np.where(used, work, 0.0).max(axis=1),
        largest_layer_params=np.where(used, largest, 0.0).max(axis=1),
        boundary_bytes=(out[last] + spanning).max(axis=0),
    )
