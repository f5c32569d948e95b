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

import numpy as np

from costmodel.headroom import usable_gib
from costmodel.local import LayerCost
from costmodel.memory import GIB, in_flight_microbatches, model_state_bytes
from costmodel.specs import ParallelConfig
from costmodel.step import FRAGMENTATION, local_config
from costmodel.table import RECOMPUTE_CODES, CostTable


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


def group_costs(table: CostTable, cfg: ParallelConfig) -> GroupCosts:
    """Layer costs of every group under every recompute choice for ``cfg``'s local configuration."""
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
    return GroupCosts(time, act, work, params, experts, out, recomputable)


@dataclass(frozen=True)
class StageBudget:
    """What a rank may spend on activations once its fixed memory is paid."""

    act_budget_bytes: float
    """Capacity left for (1 + fragmentation)·(in-flight activations + largest transient)."""
    flight: float
    """In-flight micro-batches of this rank (units of the whole rank)."""


def stage_budget(table: CostTable, cfg: ParallelConfig, gc: GroupCosts, counts: np.ndarray, rank: int, boundary_bytes: float) -> StageBudget:
    """Fixed memory of a rank holding ``counts`` layers per group: model states, communication
    buffers and runtime overhead (mirrors ``costmodel.step``), and the activation budget left."""
    params = float(counts @ gc.params)
    expert = float(counts @ gc.expert_params)
    sizes = (cfg.param_bytes, cfg.grad_bytes, cfg.optimizer_bytes)
    dense_shard = cfg.dp * cfg.cp
    states = sum(model_state_bytes(params - expert, dense_shard, cfg.zero, *sizes))
    states += sum(model_state_bytes(expert, max(1, dense_shard // cfg.ep), cfg.zero, *sizes))
    largest = float(gc.params[counts > 0].max()) if counts.any() else 0.0
    buffers = (4 * boundary_bytes if cfg.pp > 1 else 0.0) + (2 * cfg.param_bytes * largest if cfg.zero == 3 else 0.0)
    buffers += boundary_bytes * cfg.tp if cfg.sp and cfg.tp > 1 else 0.0
    capacity = (usable_gib(table.cluster) - table.cluster.runtime_overhead_gib) * GIB
    flight = in_flight_microbatches(cfg.schedule, rank, cfg.pp, cfg.vpp, cfg.num_microbatches)
    return StageBudget((capacity - states - buffers) / (1 + FRAGMENTATION), flight)
