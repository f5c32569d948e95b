"""A floor on the slowest pipeline rank when memory forces recomputation.

The other floors of ``search.bounds`` price every layer at its time without recomputation. When the
activations of the in-flight micro-batches do not fit, some layers must be recomputed (or the split
must move layers off the ranks that hold the most micro-batches, which slows the ranks that take
them); this floor sees both.

Take the most common layer group (the model's block; every other layer is left out, which only
lightens the ranks, except the first and the last layer, which every split puts on rank 0 and on rank
pp − 1: the first opens chunk 0, the last closes chunk pp·vpp − 1) and its three recomputation modes
i with per-micro-batch time t_i (forward, backward, recomputation, exposed and slowed-down hidden
communication: ``RankSums.time_s``), stored activations a_i and transient bytes w_i. A pipeline rank r
that holds k ≥ 1 blocks in a mix q of modes (any split and any per-layer recomputation is such a k
and q, with k a whole number) fits only if k·(P + 1.05·f_r·a(q)) ≤ μ_r, the rest of
``costmodel.step.rank_memory`` being non-negative: P the block's parameter, gradient and optimizer
bytes as the option shards them (``model_state_bytes``), f_r the micro-batches the rank holds at its
peak (``costmodel.memory.in_flight_microbatches``), 1.05 the allocator slack on activations and
transients (``costmodel.step.FRAGMENTATION``), and μ_r the GPU's memory less the runtime overhead, what the rank holds in
every split beside its layers (:func:`rank_extra_bytes`), the pinned layers' states and f_r times their least activations, and 1.05 times the largest least
transient of the rank's layers (P as the engine holds the states: :func:`block_state_bytes`); its time is k·t(q) plus the pinned layers' least time c_r. Each
pinned layer takes its cheapest mode for time and for memory separately (a relaxation). The least M
such that ranks of time at most M can hold all n blocks is a
floor on the slowest rank of every fitting configuration:

- rank r holds at most K_r(M) = 1/z* blocks in a real mix, z* = min over mixes q of
  max(t(q)/(M − c_r), m_r(q)/μ_r) with m_r(q) = P + 1.05·f_r·a(q): a linear program over the
  simplex, whose optimum lies at a mode or where the two ratios cross on an edge between two modes (a
  basic solution has at most two modes). It holds a whole number k_r ≤ ⌊K_r(M)⌋ of blocks, each in
  one mode: k_r(M) is the largest count some whole number of blocks per mode fits (checked exactly:
  for each count of the first mode the second mode's count lies in an interval);
- Σ_r k_r(M) grows with M; bisection keeps M below the least M with Σ_r k_r(M) ≥ n
  (``BISECTIONS`` steps), and no M fits when even unbounded time leaves Σ_r k_r < n, or when a
  rank's pinned layers alone overflow it (then no configuration of the option fits: the floor is
  infinite).
"""

from __future__ import annotations

import math

from types import SimpleNamespace

from costmodel.headroom import usable_gib
from costmodel.memory import GIB, in_flight_microbatches, stranded_logit_bytes
from costmodel.rank_memory import _buffer_bytes, _state_bytes, _tp_embedding_grad_bytes, p2p_buffer_bytes
from costmodel.specs import ParallelConfig
from costmodel.step import FRAGMENTATION, _terms, local_config, view_key
from costmodel.table import CostTable

BISECTIONS = 24
"""Bisection steps on M between the caller's floor and n times the slowest mode (within about
n·t/1.7e7, far below the gaps reported)."""
MODES = ("none", "selective", "full")


RankKey = tuple[float, float, float, float]
"""(in-flight micro-batches f_r, pinned layers' least time c_r, bytes left for the blocks μ_r with the
blocks' least transient taken off, the pinned layers' largest least transient)."""


def rank_model(table: CostTable, cfg: ParallelConfig, memo: dict | None = None,
               mode: str | None = None) -> tuple[int, dict[RankKey, int], dict[RankKey, list[tuple[float, float]]], list[float], RankKey] | None:
    """The module docstring's ranks: (n blocks, rank key -> how many ranks share it, rank key -> the
    block's (time, bytes) per mode, the block's time per mode, rank 0's key); None when a rank's
    pinned layers alone overflow it. ``mode``: every block recomputes that way (one point, thrice)."""
    counts = _counts(table)
    main = max(range(len(counts)), key=lambda g: (counts[g], -g))
    times, acts, works, state = _block(table, cfg, main, memo)
    room = (usable_gib(table.cluster) - table.cluster.runtime_overhead_gib) * GIB
    slack = 1 + FRAGMENTATION
    ranks: dict[RankKey, int] = {}
    first: RankKey = (0.0, 0.0, 0.0)
    boundary = _smallest_boundary_bytes(table, cfg) if _terms(table, cfg).torch_pipelining else 0.0
    for rank in range(cfg.pp):
        f = in_flight_microbatches(cfg.schedule, rank, cfg.pp, cfg.vpp, cfg.num_microbatches)
        f = min(f, 1.0) if cfg.offload_activations else f
        chunks = cfg.vpp if cfg.pp > 1 else 1  # every chunk receives its input but the pipeline's first, its gradient but the last
        recv = p2p_buffer_bytes(cfg, boundary * (chunks - (rank == 0)), boundary * (chunks - (rank == cfg.pp - 1)))
        fixed_s, fixed_bytes, pinned_work = 0.0, rank_extra_bytes(table, cfg, rank, f) + recv, 0.0
        for layer in _pinned(table, cfg.pp, rank, main):
            l_times, l_acts, l_works, l_state = _block(table, cfg, int(table.layer_group[layer]), memo)
            fixed_s += min(l_times)
            fixed_bytes += l_state + slack * f * min(l_acts)
            pinned_work = max(pinned_work, min(l_works))
        if fixed_bytes + slack * pinned_work > room:
            return None  # the layers this rank must hold do not fit on it
        key = (f, fixed_s, room - fixed_bytes - slack * max(pinned_work, min(works)), pinned_work)
        ranks[key] = ranks.get(key, 0) + 1
        first = key if rank == 0 else first
    points = {key: [(t, state + slack * key[0] * a) for t, a in zip(times, acts)] for key in ranks}
    if mode is not None:  # one point, thrice: the mixes of _whole_blocks are that point
        points = {key: [pts[MODES.index(mode)]] * 3 for key, pts in points.items()}
    return counts[main], ranks, points, times, first


def pressure_floor_s(table: CostTable, cfg: ParallelConfig, memo: dict | None = None, known_s: float = 0.0,
                     mode: str | None = None) -> float:
    """The module docstring's floor on the slowest rank's micro-batch time, or ``known_s`` (a floor
    the caller has already) when that is higher; ``inf`` when no configuration of the option fits.
    ``mode``: every block recomputes that way (engines with one mode per job: the floor over the
    configurations of that mode alone)."""
    model = rank_model(table, cfg, memo, mode)
    if model is None:
        return math.inf
    n, ranks, points, times, _ = model
    counts = _counts(table)
    works = _block(table, cfg, max(range(len(counts)), key=lambda g: (counts[g], -g)), memo)[2]
    works = works if mode is None else [works[MODES.index(mode)]] * 3

    def held(limit_s: float) -> float:
        return sum(count * _tiered_blocks(points[key], works, key, limit_s, n) for key, count in ranks.items())

    lo, hi = known_s, n * max(times) + max(key[1] for key in ranks)
    if held(hi) < n:
        return math.inf
    if lo >= hi or held(lo) >= n:  # memory does not bind beyond what the caller knows
        return max(lo, 0.0)
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2
        if held(mid) >= n:
            hi = mid
        else:
            lo = mid
    return lo


def _tiered_blocks(points: list[tuple[float, float]], works: list[float], key: RankKey, limit_s: float, most: int) -> int:
    """The most whole blocks a rank of ``key`` holds within ``limit_s`` (:func:`_whole_blocks`) with
    the transient its blocks' modes bring: a rank's transient is its layers' largest
    (``costmodel.ranks``: ``RankSums.work_bytes``, in every peak phase of
    ``costmodel.rank_phases``), so blocks in modes of transient at most w leave ``μ_r`` less 1.05
    times what w adds to the transient already taken off (``rank_model``: the pinned layers' and
    the blocks' least). The best over the thresholds w among the modes' transients; a floor, as every
    mix of modes lies under the threshold of its largest transient. Recomputing a MoE block makes its
    transient the whole block's activations, where without recomputation it is the combine's backward
    alone (``costmodel.activations``), so the least transient misses most of the selective ranks'."""
    slack, taken = 1 + FRAGMENTATION, max(key[3], min(works))
    best = 0
    for w in sorted(set(works)):
        allowed = [p for p, wi in zip(points, works) if wi <= w]
        allowed += [allowed[-1]] * (3 - len(allowed))
        best = max(best, _whole_blocks(allowed, limit_s - key[1], key[2] - slack * (max(key[3], w) - taken), most))
    return best


def _smallest_boundary_bytes(table: CostTable, cfg: ParallelConfig) -> float:
    """The smallest output of a layer that can end a chunk (every layer but the last), per
    micro-batch: what each of a pipeline rank's receive buffers holds at the least under torch
    pipelining (``costmodel.rank_memory.p2p_buffer_bytes``, one per micro-batch for the input of
    every chunk but the pipeline's first and for the output gradient of every chunk but its last)."""
    if cfg.pp == 1 or len(table.layer_group) < 2:
        return 0.0
    view = local_config(table, cfg, "none")
    return min(table.cost(int(g), view).out_bytes for g in set(table.layer_group[:-1].tolist()))


def _pinned(table: CostTable, pp: int, rank: int, main: int) -> list[int]:
    """Layers outside the main group that ``rank`` holds in every split: the first layer opens
    chunk 0 (rank 0), the last closes chunk pp·vpp − 1 (rank pp − 1)."""
    last = len(table.layer_group) - 1
    out = [0] if rank == 0 and table.layer_group[0] != main else []
    if rank == pp - 1 and last > 0 and table.layer_group[last] != main:
        out.append(last)
    return out


def _counts(table: CostTable) -> list[int]:
    counts = [0] * len(table.groups)
    for g in table.layer_group:
        counts[int(g)] += 1
    return counts


def _block(table: CostTable, cfg: ParallelConfig, group: int, memo: dict | None) -> tuple[list[float], list[float], list[float], float]:
    """(time, stored activation bytes, transient bytes, each per mode; state bytes) of one layer of
    ``group`` under ``cfg``; each transient net of the stored activations it holds again
    (``LayerCost.work_stored_bytes``), as a backward's start adds it (``costmodel.ranks.stored_in_work``),
    so that the floor stays under the priced peak."""
    key = ("pressure", group, view_key(cfg, "none"), cfg.dp, cfg.cp, cfg.zero, cfg.param_bytes, cfg.grad_bytes, cfg.optimizer_bytes,
           cfg.offload_optimizer)
    if memo is not None and key in memo:
        return memo[key]
    slow = table.cluster.efficiency.overlap_slowdown
    costs = [table.cost(group, local_config(table, cfg, mode)) for mode in MODES]
    times = [c.fwd_s + c.bwd_s + c.recompute_s + c.comm_exposed_s + slow * c.comm_hidden_s for c in costs]
    acts = [c.act_bytes for c in costs]
    works = [c.work_bytes - c.work_stored_bytes for c in costs]
    state = block_state_bytes(table, cfg, costs[0].params, costs[0].expert_params)
    out = (times, acts, works, state)
    if memo is not None:
        memo[key] = out
    return out


def rank_extra_bytes(table: CostTable, cfg: ParallelConfig, rank: int, flight: float, held_grad: bool = False) -> float:
    """Bytes pipeline rank ``rank`` holds at its peak in every split, beside its layers
    (``costmodel.rank_memory.rank_parts``): the allocator's stranded logits block at an eager loss
    (``costmodel.memory.stranded_logit_bytes``, the rank holding the head), and the full-vocabulary
    embedding gradient under TP (``_tp_embedding_grad_bytes``, rank 0) where the peak phase holds the
    gradients (an engine that keeps them, or a rank that runs more micro-batches than it holds), or
    always with ``held_grad`` (the stage search's budget, which steers and need not be a floor: the
    other peak phase holds them beside one micro-batch fewer)."""
    terms = _terms(table, cfg)
    tokens = cfg.micro_batch * (table.model.tokens_per_sample or cfg.seq_len) / cfg.cp
    out = stranded_logit_bytes(table.model, tokens, cfg.tp, rank, cfg.pp) if terms.loss_strands_logits else 0.0
    if held_grad or not terms.grads_freed_each_step or cfg.num_microbatches > (1 if cfg.pp == 1 else flight):
        out += _tp_embedding_grad_bytes(table, cfg, terms, rank)[0]
    return out


def block_state_bytes(table: CostTable, cfg: ParallelConfig, params: float, expert_params: float) -> float:
    """Parameter, gradient and optimizer bytes of ``params`` (``expert_params`` of them experts) as the
    option's engine holds them (``costmodel.rank_memory._state_bytes``: ZeRO run as FSDP2, whole
    gradients under pipelining, fp32 shards), without offloaded optimizer states. Linear in the
    parameters, so a rank's states are the sum over its layers. A rank's peak counts every one of
    them, also where the engine frees gradients each step (``costmodel.rank_memory.rank_parts``: the
    freed gradients stay reserved as ``allocator_cache``). With them, the buffers that grow with the
    parameters (``costmodel.rank_memory._buffer_bytes``: the stage FSDP2 keeps gathered under
    pipelining, Transformer Engine's FP8 weight copies)."""
    terms = _terms(table, cfg)
    d, e = _state_bytes(cfg, SimpleNamespace(params=params, expert_params=expert_params), terms)  # type: ignore[arg-type]
    per_param = _buffer_bytes(cfg, SimpleNamespace(params=params, boundary_bytes=0.0, largest_layer_params=0.0), terms)  # type: ignore[arg-type]
    return d[0] + d[1] + e[0] + e[1] + (0.0 if cfg.offload_optimizer else d[2] + e[2]) + per_param


def _most_blocks(points: list[tuple[float, float]], limit_s: float, room: float) -> float:
    """K = 1/z*: the most blocks (a real number) a rank holds within ``limit_s`` and ``room`` bytes,
    the blocks' (time, memory) per mode being ``points`` and any mix of modes allowed."""
    if limit_s <= 0 or room <= 0:
        return 0.0
    best = min(max(t / limit_s, m / room) for t, m in points)
    for (t1, m1), (t2, m2) in ((points[0], points[1]), (points[0], points[2]), (points[1], points[2])):
        a1, b1, a2, b2 = t1 / limit_s, m1 / room, t2 / limit_s, m2 / room
        slope = (a2 - a1) - (b2 - b1)
        if slope != 0.0:
            lam = (b1 - a1) / slope
            if 0.0 < lam < 1.0:
                best = min(best, a1 + lam * (a2 - a1))
    return 1.0 / best if best > 0 else math.inf


TOLERANCE = 1e-9
"""Relative slack on every comparison of :func:`_whole_blocks`, erring towards "fits" (a floor)."""


def _whole_blocks(points: list[tuple[float, float]], limit_s: float, room: float, most: int) -> int:
    """The most whole blocks (at most ``most``) a rank holds within ``limit_s`` and ``room`` bytes,
    each block in one mode: down from ⌊K⌋ (:func:`_most_blocks`, the real relaxation) to the first
    count that some whole number of blocks per mode fits (fewer blocks always fit if more do)."""
    if limit_s <= 0 or room <= 0:
        return 0
    upper = _most_blocks(points, limit_s, room)
    k = most if upper >= most else math.floor(upper * (1 + TOLERANCE))
    while k > 0 and not _fits(points, k, limit_s, room):
        k -= 1
    return k


def _fits(points: list[tuple[float, float]], k: int, limit_s: float, room: float) -> bool:
    """Whether k blocks fit in whole numbers per mode: for each count c of the first mode, the
    blocks x in the second mode (the rest in the third) meet two linear constraints, an interval."""
    (t_a, m_a), (t_b, m_b), (t_c, m_c) = points
    for c in range(k + 1):
        rest = k - c
        lo, hi = 0.0, float(rest)
        for coef, rhs, scale in ((t_b - t_c, limit_s - c * t_a - rest * t_c, limit_s), (m_b - m_c, room - c * m_a - rest * m_c, room)):
            rhs += TOLERANCE * scale
            if coef > 0:
                hi = min(hi, rhs / coef)
            elif coef < 0:
                lo = max(lo, rhs / coef)
            elif rhs < 0:
                hi = -1.0
        if math.ceil(lo - TOLERANCE) <= math.floor(hi + TOLERANCE) and hi >= 0:
            return True
    return False
