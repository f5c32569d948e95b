"""Lower bounds on a base option's step time over every stage split and recomputation.

Each bound below never exceeds the cost model's step time (``costmodel.step.estimate_step``) of any
configuration of the option's shape that fits in memory, whatever its split and recomputation (all
but the memory-pressure floor hold for configurations that do not fit too); ``tests/search/
test_bounds.py`` checks each against the exhaustive solver on small cases.

1. Pipeline (``costmodel.pipeline``): the step's pipelined part is m·M + (S − M)/d with M the slowest
   rank's micro-batch time, S the ranks' sum and d = 1 for 1F1B and GPipe, v for interleaved 1F1B,
   3 for ZB-H1; it grows with M (m ≥ 1 ≥ 1/d). Every layer costs at least its time without
   recomputation, so S ≥ Σ of those times, and M ≥ S/p (some rank holds a p-th) and M ≥ B*, the
   least possible slowest chunk when the layers are cut into p·v contiguous chunks (a rank holds
   whole chunks; the linear-partition bottleneck, bracketed by bisection with the greedy
   feasibility test, which is exact for contiguous cuts: Bokhari 1988), and M ≥ the least makespan of
   the layers as indivisible jobs on p machines, whatever their order (every split assigns each
   layer to one rank; computed exactly when all but at most ``MAX_EXTRA_LAYERS`` layers are identical:
   the few others are placed in every way, the identical ones fill what is left), and M ≥ the
   memory-pressure floor of ``search.pressure`` (for configurations that fit: the recomputation, or
   the lopsided split, that the in-flight activations force). So the part is at least
   (m − 1/d)·max(S/p, B*, makespan, pressure) + S/d.
2. Optimizer (``costmodel.step._optimizer_time``): Adam over each GPU's shard is affine in the rank's
   parameters and the step waits for the slowest rank, whose time is at least the time at the mean
   parameters over the p ranks (every layer lives on one rank), plus the fixed per-step and host costs.
3. Pipeline transfers (``costmodel.step._pipeline_comm``): the exposed send/receive time grows with
   the largest boundary activation, which is at least the smallest output of any layer that can end a
   chunk (the last layer never sends).
4. Stragglers (``costmodel.step.straggler_time``) depend only on the GPU count.
5. Data-parallel gradient reduction and parameter gather (``costmodel.step._data_parallel_comm``):
   the exposed time is the largest over ranks r of E_r = reduction − the backward it hides behind +
   gather − the forward it hides behind − r·(forward + backward)/v of pipeline slack, so it is at least
   the mean over the p ranks, and at least 0. Each collective costs at least its cheapest protocol's
   seconds per byte times the bytes (NCCL's cost is a minimum of affine terms with non-negative
   latency), so the ranks' reductions sum to at least that slope times all the layers' gradients;
   the slack of the ranks sums to at most (p − 1)/v times all the layers' forward and backward, and
   (each rank's forward and backward being at most the slowest rank's time M) to at most
   M·p(p − 1)/(2v). The second depends on M, which term 1 bounds from below by M₀: the step is at
   least (m − 1/d)·M plus this term, whose slope in M is at least (m − 1/d) − (p − 1)/(2v); when that
   is not negative the sum is least at M = M₀, so the term is taken at M₀ there (``bound_s``). The
   first rank has no slack at all: ``search.exposure`` bounds terms 1 and 5 together from it, and
   ``search.rank_exposure`` from every rank (the later ones have at most r·M/v of slack).
6. Gradient accumulation (``costmodel.step._accumulation_time``, engines that do not fuse it into the
   weight-gradient GEMM: the native runtime, torchtitan, DeepSpeed): linear in the rank's parameters,
   and the step pays the largest rank's, at least the mean rank's.
The pipelined part's S (term 1) is at least the slowest rank M (S = M at pp 1, where the
memory-pressure floor is all the bound has), and at least the least sum the ranks' memory allows
(``search.rank_sum``: where the activations do not fit every rank must recompute some blocks).
Engines that take one recomputation mode for every layer (torchtitan, DeepSpeed, native ZB-H1:
:func:`uniform_modes`) are bounded per mode, every layer's time and the pressure floor in that mode,
and the option's bound is the least over its modes.
Offload and the refill of a pipeline by recomputation add non-negative time, so leaving them out
keeps the bound below every step.

The search orders options lazily (``search.frontier``) by :func:`quick_bound_s`, term 1 with the
slowest rank at its mean S/p (and S without ZeRO-3's per-layer communication) plus term 4: never
above :func:`bound_s` (B* ≥ S/p, ZeRO-3 only adds time, terms 2, 3, 5 are non-negative), and one memo
lookup per option where the full bound costs a few hundred microseconds.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from costmodel.memory import GIB
from costmodel.pipeline import ZB_H1_BUBBLE_SHARE
from costmodel.flops import model_flops_per_step
from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig
from costmodel.step import FRAGMENTATION, _accumulation_time, _dp_coefficients, _optimizer_time, _pipeline_comm, _terms, local_config, straggler_time, view_key
from costmodel.table import RECOMPUTE_CODES, CostTable
from search.exposure import bucket_floor_s, first_rank_floor_s, first_rank_terms
from search.pressure import block_state_bytes, pressure_floor_s
from search.rank_exposure import later_ranks_floor_s
from search.rank_sum import joint_floor_s, least_sums, rank_sum_extra_s
from search.targets import RULES, native_zb_modes
from search.types import SearchRequest


def bubble_divisor(cfg: ParallelConfig) -> float:
    """d in the bound: how much the schedule shrinks the fill-and-drain term."""
    if cfg.schedule == "interleaved-1f1b":
        return float(cfg.vpp)
    if cfg.schedule == "zb-h1":
        return 1.0 / ZB_H1_BUBBLE_SHARE
    return 1.0


@dataclass(frozen=True)
class ViewSums:
    """What the bounds need of one local view (no recomputation), computed once per view."""

    cum: list[float]
    """Prefix sums of the layers' micro-batch times in the view (with its recomputation; the fastest
    under ``none``), in layer order (0 first)."""
    group_times: tuple[float, ...]
    group_counts: tuple[int, ...]
    fwd_s: float
    bwd_s: float
    params: float
    expert_params: float
    smallest_boundary_bytes: float
    """Smallest output of a layer that can end a chunk (every layer but the last)."""

    @property
    def total_s(self) -> float:
        return self.cum[-1]


def view_sums(table: CostTable, view: object, memo: dict | None = None) -> ViewSums:
    """:class:`ViewSums` of ``view`` (``costmodel.step.local_config(..., "none")``), memoised."""
    if memo is not None and ("sums", view) in memo:
        return memo["sums", view]
    slow = table.cluster.efficiency.overlap_slowdown
    costs = [table.cost(g, view) for g in range(len(table.groups))]
    per_group = np.array([c.fwd_s + c.bwd_s + c.recompute_s + c.comm_exposed_s + slow * c.comm_hidden_s for c in costs])
    counts = np.bincount(table.layer_group, minlength=len(costs))
    out = np.array([c.out_bytes for c in costs])
    sums = ViewSums(
        cum=np.concatenate([[0.0], np.cumsum(per_group[table.layer_group])]).tolist(),
        group_times=tuple(float(x) for x in per_group), group_counts=tuple(int(x) for x in counts),
        fwd_s=float(sum(n * c.fwd_s for n, c in zip(counts, costs))),
        bwd_s=float(sum(n * c.bwd_s for n, c in zip(counts, costs))),
        params=float(sum(n * c.params for n, c in zip(counts, costs))),
        expert_params=float(sum(n * c.expert_params for n, c in zip(counts, costs))),
        smallest_boundary_bytes=float(out[table.layer_group[:-1]].min()) if len(table.layer_group) > 1 else 0.0,
    )
    if memo is not None:
        memo["sums", view] = sums
    return sums


def fastest_sum_s(table: CostTable, cfg: ParallelConfig, memo: dict | None = None) -> float:
    """Sum over all layers of their fastest per-micro-batch time under ``cfg``'s local view."""
    return view_sums(table, local_config(table, cfg, "none"), memo).total_s


def bound_s(table: CostTable, cfg: ParallelConfig, memo: dict | None = None, pressure: bool = True) -> float:
    """A lower bound on the step time of ``cfg`` over every split and recomputation: the sum of the
    module docstring's terms 1-6 (``memo``, a dict the caller owns, caches what options with the
    same local view share). ``pressure=False`` leaves out the memory-pressure floor of term 1 (the
    costliest part), for a bound that is cheaper and never higher. Where the option's engine takes
    one recomputation mode for every layer (:func:`uniform_modes`), the least over those modes of the
    bound with every layer in that mode."""
    modes = uniform_modes(cfg) if pressure else None
    if modes is None:
        return _mode_bound(table, cfg, memo, pressure, "none", None)
    return min(_mode_bound(table, cfg, memo, pressure, mode, mode) for mode in modes)


def uniform_modes(cfg: ParallelConfig) -> tuple[str, ...] | None:
    """The recomputation modes of an engine that applies one mode to every layer (``search.targets``:
    torchtitan and DeepSpeed; the native runtime under ZB-H1, none or full), else None."""
    rules = RULES.get(cfg.engine)
    if rules is None:
        return None
    zb = native_zb_modes(rules, cfg.schedule, cfg.pp)
    if zb is not None:
        return tuple(RECOMPUTE_CODES[m[0]] for m in zb)
    return rules.recompute_modes if rules.recompute == "uniform" else None


def _mode_bound(table: CostTable, cfg: ParallelConfig, memo: dict | None, pressure: bool, view_mode: str, mode: str | None) -> float:
    """:func:`bound_s` with every layer's time taken in ``view_mode`` (its fastest, ``none``, unless
    the engine fixes one ``mode`` for all layers, which the pressure floor then keeps too)."""
    view = local_config(table, cfg, view_mode)
    v = view_sums(table, view, memo)
    d = bubble_divisor(cfg)
    slowest = max(_bottleneck(v, cfg.pp, cfg.pp * cfg.vpp, view, memo), _makespan(v, cfg.pp, view, memo))
    slowest = pressure_floor_s(table, cfg, memo, slowest, mode) if pressure else slowest
    if slowest == math.inf:  # no configuration of the option fits (and 0·inf would be nan at m = 1)
        return math.inf
    if pressure:  # terms 1 and 5 together, from the first rank (search.exposure), never below their sum
        others = least_sums(table, cfg, memo, mode, without_first=True) if cfg.pp > 1 else None
        core = first_rank_floor_s(table, cfg, view, v.group_times, slowest, d, lambda m: _dp_floor(table, cfg, v, m), others)
        core = max(core, later_ranks_floor_s(table, cfg, view, v.group_times, slowest, d, lambda m: _dp_floor(table, cfg, v, m),
                                             bucket_floor_s(table, cfg, view)))
    else:
        core = (cfg.num_microbatches - 1.0 / d) * slowest + _dp_floor(table, cfg, v, slowest)
    total = v.total_s
    if pressure and cfg.pp > 1:  # the ranks' sum grows too where memory forces recomputation (search.rank_sum)
        main = max(range(len(v.group_counts)), key=lambda g: (v.group_counts[g], -g))
        total += rank_sum_extra_s(table, cfg, v.group_times[main], memo, mode)
    gpus = cfg.tp * cfg.pp * cfg.dp * cfg.cp
    extras = _optimizer_floor(table, cfg, v) + _accumulation_floor(table, cfg, v) + _p2p_floor(table, cfg, v)
    extras += straggler_time(gpus, table.cluster.gpus_per_node)
    pipelined = core + max(total, slowest) / d
    if pressure and cfg.pp > 1 and total > v.total_s:  # memory binds: M and S of one split together (search.rank_sum)
        main = max(range(len(v.group_counts)), key=lambda g: (v.group_counts[g], -g))
        others_s = v.total_s - v.group_counts[main] * v.group_times[main]
        joint = joint_floor_s(table, cfg, slowest, others_s, d, memo, mode, first_rank_terms(table, cfg, view),
                              bucket_floor_s(table, cfg, view))
        pipelined = max(pipelined, joint)
    return pipelined + extras


QUICK_MARGIN = 1e-12
"""Relative margin taken off :func:`quick_bound_s`, which covers the rounding of sums done in a
different order from :func:`bound_s`'s (the ZeRO-3 relaxation) many times over."""


def quick_bound_s(table: CostTable, cfg: ParallelConfig, straggler_s: float, memo: dict) -> float:
    """A cheaper lower bound than :func:`bound_s`, never above it: ((m − 1/d)·S/p + S/d)·(1 − ε),
    then ``straggler_s`` (term 4 of the option's GPU count, which the caller computes once). S is the
    sum of the layers' fastest times of the option's view without ZeRO-3 sharding: ZeRO-3 only adds
    its per-layer gathers and reduce-scatter (``costmodel.layer_transformer._zero3_comm``,
    ``costmodel.layer_other._zero3``) as exposed time plus hidden time (the link time less the
    exposed part, at least 0), so each layer's time under ZeRO-3 is at least its time without; one
    S serves the four ZeRO stages. Memoised by :func:`costmodel.step.view_key`."""
    relaxed = cfg if cfg.zero != 3 else _unsharded(cfg)
    key = ("total", view_key(relaxed, "none"))
    total = memo.get(key)
    if total is None:
        total = memo[key] = view_sums(table, local_config(table, relaxed, "none"), memo).total_s
    d = bubble_divisor(cfg)
    return ((cfg.num_microbatches - 1.0 / d) * (total / cfg.pp) + total / d) * (1.0 - QUICK_MARGIN) + straggler_s


def _unsharded(cfg: ParallelConfig) -> ParallelConfig:
    """``cfg`` with ZeRO-2 in place of ZeRO-3 (an option or a configuration)."""
    if isinstance(cfg, ParallelConfig):
        return cfg.model_copy(update={"zero": 2})
    return dataclasses.replace(cfg, zero=2)


BISECTIONS = 16
"""Bisection steps of the bottleneck floor: within 2^-16 of the largest layer's time of B*."""


def bottleneck_floor_s(table: CostTable, cfg: ParallelConfig, memo: dict | None = None) -> float:
    """A lower bound on the slowest rank's micro-batch time over every cut of the layers into pp·vpp
    contiguous chunks (term 1): max(S/p, B*), with B* the largest time bisection proved too small
    for every cut (B* lies between max(S/c, the largest layer) and that plus the largest layer)."""
    view = local_config(table, cfg, "none")
    return _bottleneck(view_sums(table, view, memo), cfg.pp, cfg.pp * cfg.vpp, view, memo)


def _bottleneck(v: ViewSums, ranks: int, chunks: int, view: object, memo: dict | None) -> float:
    key = ("bottleneck", view, ranks, chunks)
    if memo is not None and key in memo:
        return memo[key]
    cum = v.cum
    largest = max(b - a for a, b in zip(cum, cum[1:]))
    lo = max(cum[-1] / ranks, largest)
    hi = min(cum[-1], max(cum[-1] / chunks, largest) + largest)
    if chunks == 1:
        lo = hi
    elif _fits_in_chunks(cum, lo, chunks):
        hi = lo
    lo = _bisect_floor(lo, hi, lambda x: _fits_in_chunks(cum, x, chunks))
    if memo is not None:
        memo[key] = lo
    return lo


def _bisect_floor(lo: float, hi: float, fits: Callable[[float], bool]) -> float:
    """``lo`` after :data:`BISECTIONS` halvings of ``[lo, hi]`` towards the least value that ``fits``
    (monotone, true at ``hi`` when ``hi > lo``): still at most that least value, so a sound floor."""
    for _ in range(BISECTIONS if hi > lo else 0):
        mid = (lo + hi) / 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return lo


MAX_EXTRA_LAYERS = 5
"""Layers outside the most common group that :func:`makespan_floor_s` places exhaustively."""


def makespan_floor_s(table: CostTable, cfg: ParallelConfig, memo: dict | None = None) -> float:
    """The least makespan of the layers on pp ranks, ignoring their order (term 1); 0 when more than
    ``MAX_EXTRA_LAYERS`` layers differ from the most common group."""
    view = local_config(table, cfg, "none")
    return _makespan(view_sums(table, view, memo), cfg.pp, view, memo)


def _makespan(v: ViewSums, ranks: int, view: object, memo: dict | None) -> float:
    key = ("makespan", view, ranks)
    if memo is not None and key in memo:
        return memo[key]
    main = max(range(len(v.group_counts)), key=lambda g: (v.group_counts[g], -g))
    extras = [v.group_times[g] for g, n in enumerate(v.group_counts) if g != main for _ in range(n)]
    t, blocks, lo = v.group_times[main], v.group_counts[main], 0.0
    if ranks > 1 and len(extras) <= MAX_EXTRA_LAYERS and t > 0:
        groupings = [[sum(part) for part in parts] for parts in _partitions(extras) if len(parts) <= ranks]
        lo = max(v.total_s / ranks, max(extras, default=0.0), t)
        hi = lo + t + max(extras, default=0.0)
        def fits(x: float) -> bool:
            return _fits_on_ranks(groupings, t, blocks, ranks, x)

        if fits(lo):
            hi = lo
        if hi > lo and fits(hi):
            lo = _bisect_floor(lo, hi, fits)
    if memo is not None:
        memo[key] = lo
    return lo


def _partitions(items: list[float]) -> list[list[list[float]]]:
    """Every way to group ``items`` into non-empty sets (the Bell number of them: 52 for 5)."""
    if not items:
        return [[]]
    first, out = items[0], []
    for rest in _partitions(items[1:]):
        out.append([[first]] + rest)
        out += [rest[:i] + [[first] + rest[i]] + rest[i + 1:] for i in range(len(rest))]
    return out


def _fits_on_ranks(groupings: list[list[float]], t: float, blocks: int, ranks: int, limit: float) -> bool:
    """Whether some grouping of the odd layers onto ranks leaves room for ``blocks`` layers of time
    ``t`` under ``limit`` per rank (a tolerance of 1e-9 errs towards "fits", keeping the floor sound)."""
    for sums in groupings:
        if max(sums, default=0.0) > limit * (1 + 1e-12):
            continue
        room = sum(math.floor((limit - x) / t + 1e-9) for x in sums) + (ranks - len(sums)) * math.floor(limit / t + 1e-9)
        if room >= blocks:
            return True
    return False


def _fits_in_chunks(cum: list[float], limit: float, chunks: int) -> bool:
    """Whether the layers (prefix sums ``cum``) cut greedily into chunks of at most ``limit`` take at
    most ``chunks`` chunks (greedy is optimal for this test)."""
    start, n = 0, len(cum) - 1
    for _ in range(chunks):
        start = bisect.bisect_right(cum, cum[start] + limit, start) - 1
        if start >= n:
            return True
    return False


def optimizer_floor_s(table: CostTable, cfg: ParallelConfig, memo: dict | None = None) -> float:
    """Term 2: the optimizer step of a rank holding the mean parameters (``_optimizer_time`` is affine
    in them and the slowest rank is at least the mean)."""
    return _optimizer_floor(table, cfg, view_sums(table, local_config(table, cfg, "none"), memo))


def _optimizer_floor(table: CostTable, cfg: ParallelConfig, v: ViewSums) -> float:
    return _optimizer_time(table, cfg, SimpleNamespace(params=v.params / cfg.pp, expert_params=v.expert_params / cfg.pp))


def accumulation_floor_s(table: CostTable, cfg: ParallelConfig, memo: dict | None = None) -> float:
    """Term 6: adding each micro-batch's gradients into the accumulated ones, for a rank holding the
    mean parameters (``costmodel.step._accumulation_time`` is linear in them and the step pays the
    largest rank's)."""
    return _accumulation_floor(table, cfg, view_sums(table, local_config(table, cfg, "none"), memo))


def _accumulation_floor(table: CostTable, cfg: ParallelConfig, v: ViewSums) -> float:
    return _accumulation_time(table, cfg, SimpleNamespace(params=v.params / cfg.pp, expert_params=v.expert_params / cfg.pp))


def dp_floor_s(table: CostTable, cfg: ParallelConfig, memo: dict | None = None) -> float:
    """Term 5: the mean over pipeline ranks of the exposed gradient reduction and parameter gather."""
    return _dp_floor(table, cfg, view_sums(table, local_config(table, cfg, "none"), memo))


def _dp_floor(table: CostTable, cfg: ParallelConfig, v: ViewSums, slowest: float | None = None) -> float:
    keeps = _terms(table, cfg).fsdp_keeps_gathered  # FSDP2 under PP: one gather and one reduction per step
    if (cfg.zero == 3 and not keeps) or cfg.dp * cfg.cp == 1:
        return 0.0
    (dense_red, expert_red), (dense_ag, expert_ag) = _dp_coefficients(table, cfg)
    per_step = 1 if cfg.zero < 2 or keeps else cfg.num_microbatches
    dense, expert = v.params - v.expert_params, v.expert_params
    total = per_step * cfg.grad_reduce_bytes * (_slope(dense_red) * dense + _slope(expert_red) * expert)
    if cfg.overlap_grad_reduce and not (cfg.pp > 1 and _terms(table, cfg).dp_after_flush):
        total -= per_step * v.bwd_s
    if cfg.zero:
        total += cfg.param_bytes * (_slope(dense_ag) * dense + _slope(expert_ag) * expert)
        total -= v.fwd_s if cfg.overlap_param_gather else 0.0
    slack = (cfg.pp - 1) * (v.fwd_s + v.bwd_s) / cfg.vpp
    if slowest is not None and cfg.num_microbatches - 1.0 / bubble_divisor(cfg) >= (cfg.pp - 1) / (2.0 * cfg.vpp):
        slack = min(slack, slowest * cfg.pp * (cfg.pp - 1) / (2.0 * cfg.vpp))
    total -= slack
    return max(0.0, total / cfg.pp)


def _slope(cost: object) -> float:
    """The least seconds per byte of a collective's protocols (0 for a group of one)."""
    return min((per_byte for _, per_byte in cost.terms), default=0.0)  # type: ignore[attr-defined]


def p2p_floor_s(table: CostTable, cfg: ParallelConfig, memo: dict | None = None) -> float:
    """Term 3: exposed pipeline send/receive with the smallest boundary any chunk can send."""
    return _p2p_floor(table, cfg, view_sums(table, local_config(table, cfg, "none"), memo))


def _p2p_floor(table: CostTable, cfg: ParallelConfig, v: ViewSums) -> float:
    if cfg.pp == 1:
        return 0.0
    rank = SimpleNamespace(types=(SimpleNamespace(boundary_bytes=v.smallest_boundary_bytes),))
    return _pipeline_comm(table, cfg, rank, cfg.num_microbatches)[1]  # type: ignore[arg-type]


def _memory_sums(table: CostTable, cfg: ParallelConfig, memo: dict | None) -> tuple[float, float, float]:
    none = local_config(table, cfg, "none")
    if memo is not None and ("memory", none) in memo:
        return memo["memory", none]
    full = local_config(table, cfg, "full")
    counts = np.bincount(table.layer_group, minlength=len(table.groups))
    params = expert = act = 0.0
    for g, n in enumerate(counts):
        base = table.cost(g, none)
        params += n * base.params
        expert += n * base.expert_params
        act += n * min(base.act_bytes, table.cost(g, full).act_bytes)
    if memo is not None:
        memo["memory", none] = (params, expert, act)
    return params, expert, act


def memory_bound_gib(table: CostTable, cfg: ParallelConfig, memo: dict | None = None) -> float:
    """A lower bound on the peak memory per GPU over every split and recomputation: some rank holds
    at least 1/p of the model states (ZeRO-sharded as ``cfg`` says) and at least 1/p of the
    activations stored under full recomputation, for at least one micro-batch, with the allocator's
    slack on them (``costmodel.step.FRAGMENTATION``). The state sizes are the engine's
    (:func:`search.pressure.block_state_bytes`: FSDP2's fp32 shards and gathered bf16 copy, whole
    gradients under pipelining; linear in the parameters, so some rank holds at least 1/p)."""
    params, expert, act = _memory_sums(table, cfg, memo)
    states = block_state_bytes(table, cfg, params, expert)
    return (states + (1 + FRAGMENTATION) * act) / cfg.pp / GIB + table.cluster.runtime_overhead_gib


def compute_floor_s(model: ModelSpec, cluster: ClusterSpec, req: SearchRequest) -> float:
    """A lower bound on every plan's step: the model FLOPs at every GPU's dense peak, plus the
    step's fixed cost. No kernel beats the peak and recomputation only adds work."""
    flops = model_flops_per_step(model.layers, req.global_batch, req.seq_len)
    peak = cluster.gpu.peak_bf16_tflops
    if "fp8" in req.precisions and cluster.gpu.peak_fp8_tflops is not None:  # FP8 GEMMs beat the BF16 peak
        peak = max(peak, cluster.gpu.peak_fp8_tflops)
    return flops / (req.gpus * peak * 1e12) + cluster.efficiency.step_fixed_s + straggler_time(req.gpus, cluster.gpus_per_node)
