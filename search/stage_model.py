"""Time and memory of one pipeline rank from the layers it holds, for the split and recompute search.

The search evaluates thousands of candidate stages; building a full step estimate for each would be
wasteful. A stage is summarised by how many layers of each group (``CostTable`` group) it holds;
its time per micro-batch and its memory follow from per-group layer costs by the same bookkeeping as
``costmodel.step`` (model states per ZeRO stage, in-flight micro-batches per schedule, buffers,
allocator slack). Every final plan is re-evaluated by ``costmodel.step.estimate_step``, the single
source of truth, so this summary only steers the search.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from costmodel.headroom import usable_gib
from costmodel.local import LayerCost
from costmodel.memory import GIB, in_flight_microbatches
from costmodel.rank_memory import _buffer_bytes, _p2p_bytes
from costmodel.specs import ParallelConfig
from costmodel.step import FRAGMENTATION, _terms, local_config
from costmodel.table import RECOMPUTE_CODES, CostTable
from search.pressure import block_state_bytes, rank_extra_bytes


@dataclass(frozen=True)
class GroupCosts:
    """Per group and recompute choice (rows: groups, columns: none/selective/full)."""

    time_s: np.ndarray
    act_bytes: np.ndarray
    work_bytes: np.ndarray
    params: np.ndarray
    expert_params: np.ndarray
    out_bytes: np.ndarray
    recomputable: np.ndarray
    """Whether each group may recompute (otherwise only column 0 applies)."""
    margin_bytes: float = 0.0
    """Memory each rank keeps free beyond the summary's own terms (``search.core`` raises it when the
    cost model finds the summary's best splits just over memory)."""


def group_costs(table: CostTable, cfg: ParallelConfig, margin_bytes: float = 0.0) -> GroupCosts:
    """Layer costs of every group under every recompute choice for ``cfg``'s local configuration
    (``margin_bytes``: :attr:`GroupCosts.margin_bytes`)."""
    slow = table.cluster.efficiency.overlap_slowdown
    views = [local_config(table, cfg, code) for code in RECOMPUTE_CODES]
    n = len(table.groups)
    shape = (n, len(RECOMPUTE_CODES))
    time, act, work = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    params, experts, out = np.zeros(n), np.zeros(n), np.zeros(n)
    recomputable = np.zeros(n, dtype=bool)
    for g in range(n):
        recomputable[g] = bool(table.recomputable[table.layer_group == g].any())
        for c, view in enumerate(views):
            cost: LayerCost = table.cost(g, view if recomputable[g] else views[0])
            time[g, c] = cost.fwd_s + cost.bwd_s + cost.recompute_s + cost.comm_exposed_s + slow * cost.comm_hidden_s
            act[g, c], work[g, c] = cost.act_bytes, cost.work_bytes
        base = table.cost(g, views[0])
        params[g], experts[g], out[g] = base.params, base.expert_params, base.out_bytes
    return GroupCosts(time, act, work, params, experts, out, recomputable, margin_bytes)


@dataclass(frozen=True)
class StageBudget:
    """What a rank may spend on activations once its fixed memory is paid."""

    act_budget_bytes: float
    """Capacity left for (1 + fragmentation)·(in-flight activations + largest transient)."""
    flight: float
    """In-flight micro-batches of this rank (units of the whole rank)."""


def stage_budget(table: CostTable, cfg: ParallelConfig, gc: GroupCosts, counts: np.ndarray, rank: int, boundary_bytes: float) -> StageBudget:
    """Fixed memory of a rank holding ``counts`` layers per group: model states as the engine holds
    them and what the rank holds beside its layers (``search.pressure.block_state_bytes``,
    ``rank_extra_bytes``), communication buffers (``costmodel.rank_memory._buffer_bytes``) and runtime
    overhead (mirrors ``costmodel.step``), and the activation budget left."""
    params = float(counts @ gc.params)
    expert = float(counts @ gc.expert_params)
    largest = float(gc.params[counts > 0].max()) if counts.any() else 0.0
    flight = in_flight_microbatches(cfg.schedule, rank, cfg.pp, cfg.vpp, cfg.num_microbatches)
    # the per-parameter buffers are in block_state_bytes already
    held = SimpleNamespace(params=0.0, boundary_bytes=boundary_bytes, largest_layer_params=largest)
    states = block_state_bytes(table, cfg, params, expert) + rank_extra_bytes(table, cfg, rank, flight, held_grad=True)
    terms = _terms(table, cfg)
    # receive buffers: the previous stage's boundary taken as this one's (equal between blocks)
    pipe = SimpleNamespace(boundary_bytes=boundary_bytes, recv_bytes=boundary_bytes if rank > 0 else 0.0,
                           send_bytes=boundary_bytes if rank < cfg.pp - 1 else 0.0)
    buffers = _buffer_bytes(cfg, held, terms) + _p2p_bytes(cfg, pipe, terms)  # type: ignore[arg-type]
    capacity = (usable_gib(table.cluster) - table.cluster.runtime_overhead_gib) * GIB - gc.margin_bytes
    return StageBudget((capacity - states - buffers) / (1 + FRAGMENTATION), flight)
