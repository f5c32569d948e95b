"""Sum layer costs into pipeline ranks: chunk k of ``stage_layers`` runs on rank k mod pp (Megatron's
interleaved layout: stage i = a·PP + b is virtual chunk a of rank b; ecosystem-notes B1).

Ranks that hold the same layers (in a balanced split, every rank but the first and the last) cost
the same, so they are folded into one *rank type*: the step model works once per type, in plain
floats, which keeps an estimate at tens of microseconds however deep the pipeline. Where the rank
index matters (in-flight micro-batches, gradient-reduction slack), the worst rank of a type is its
first, which ``Ranks.first_rank`` names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from costmodel.local import LayerCost, LocalConfig
from costmodel.specs import GenericLayer, HeadLayer, ParallelConfig, TransformerLayer
from costmodel.table import RECOMPUTE_CODES, CostTable

_SUMMED = ("fwd_s", "bwd_s", "recompute_s", "comm_exposed_s", "comm_hidden_s", "act_bytes", "params", "expert_params")
LINKS = ("tp", "cp", "ep", "dp")


@dataclass(frozen=True)
class RankSums:
    """One pipeline rank, per micro-batch: sums over the layers of all its chunks."""

    fwd_s: float
    bwd_s: float
    recompute_s: float
    exposed_s: float
    hidden_s: float
    act_bytes: float
    params: float
    expert_params: float
    links: dict[str, float]
    work_bytes: float
    """Largest transient activation of any layer on the rank."""
    largest_layer_params: float
    boundary_bytes: float
    """Largest activation the rank sends to the next stage per micro-batch."""
    body_work_bytes: float = 0.0
    """Largest transient activation of any layer on the rank but the output head: what can meet every
    gradient at the end of a backward (``costmodel.rank_phases.peak_phase``). The head's transient (the
    loss over the logits) is the first of a micro-batch's backward, before its gradients exist."""
    largest_layer_act_bytes: float = 0.0
    """Activations the rank's largest layer stores per micro-batch: what a layer still holds while
    its own backward runs (``costmodel.rank_phases.peak_phase``, the end of a backward)."""
    recv_bytes: float = 0.0
    """Activation bytes the rank's chunks receive per micro-batch, summed over its chunks but the
    pipeline's first (each chunk's input: the previous layer's output and any edges spanning the cut)."""
    send_bytes: float = 0.0
    """Activation bytes the rank's chunks send per micro-batch, summed over its chunks but the pipeline's last."""
    kept_send_bytes: float = 0.0
    """Of :attr:`send_bytes`, the outputs that the chunk's last layer keeps among its own stored
    activations (:func:`keeps_output`): ``fwd_cache`` holds the same tensor, counted once
    (``costmodel.rank_memory._held_act_bytes``)."""
    chunk_act_bytes: tuple[float, ...] = ()
    """Activations each of the rank's chunks stores per micro-batch, in chunk order, under an
    interleaved schedule (``vpp > 1``; empty otherwise): chunks of unequal depth are in flight in
    unequal numbers (``costmodel.memory.interleaved_held_act_bytes``)."""
    chunk_params: tuple[float, ...] = ()
    """Parameters of each of the rank's chunks (experts included), in chunk order, under an
    interleaved schedule (empty otherwise): whose gradients exist after the first backwards
    (``costmodel.rank_phases.grad_share``)."""
    chunk_peaks: tuple[tuple[float, float, float, float, float], ...] = ()
    """Of each of the rank's chunks under an interleaved schedule (empty otherwise), in chunk order: its
    largest transient, the largest but the head's, the stored bytes each holds again
    (:attr:`work_stored_bytes`) and its largest layer's parameters: what a backward of that chunk
    meets (:func:`chunk_peaks`, ``costmodel.rank_phases.peak_phase``'s later no-sync rounds)."""
    backward_curve: tuple[tuple[float, ...], ...] = ()
    """(activations held, parameters whose backward has run, the layer's parameters, the next
    layer's, the parameters of the layer back-propagated before, the layer's parameters whose gradient
    exists at its peak: :func:`_peak_grad_params`) at each layer's backward of the rank's
    only chunk, in backward order (``vpp == 1``; empty otherwise): the activations of that layer and
    of those before it in the forward with the layer's transient, and the parameters of the layers
    after it, whose gradients exist by then. Only the points that can be the largest for some bytes
    per parameter of gradient (:func:`backward_curve`): ``costmodel.rank_phases.layer_by_layer_end``."""
    work_stored_bytes: tuple[float, float] = (0.0, 0.0)
    """How much of :attr:`work_bytes` and of :attr:`body_work_bytes` a layer's own stored activations
    already hold where its transient is that of a recomputed layer (:func:`stored_in_work`): what a
    backward's start adds to the in-flight activations is the transient less this
    (``costmodel.rank_phases.backward_start``)."""

    def time_s(self, overlap_slowdown: float) -> float:
        """Forward + backward + recompute + exposed communication (+ slowdown under overlap)."""
        return self.fwd_s + self.bwd_s + self.recompute_s + self.exposed_s + overlap_slowdown * self.hidden_s


@dataclass(frozen=True)
class Ranks:
    """Every pipeline rank, folded into types of identical ranks."""

    chunk_bounds: np.ndarray
    """Layer index where each chunk starts, plus the layer count at the end (pp·vpp + 1 entries)."""
    rank_type: tuple[int, ...]
    """Type of each rank."""
    types: tuple[RankSums, ...]
    first_rank: tuple[int, ...]
    """Smallest rank index of each type."""
    count: tuple[int, ...]
    """Ranks of each type."""

    def rank(self, r: int) -> RankSums:
        return self.types[self.rank_type[r]]

    def chunks(self, rank: int, pp: int) -> list[tuple[int, int]]:
        """[start, end) layer ranges of ``rank``'s chunks, in chunk order."""
        b = self.chunk_bounds
        return [(int(b[k]), int(b[k + 1])) for k in range(rank, len(b) - 1, pp)]


@dataclass(frozen=True)
class _Fold:
    rank_type: tuple[int, ...]
    first_rank: tuple[int, ...]
    count: tuple[int, ...]
    counts: np.ndarray
    """Layers of each key held by each type (types x keys)."""
    used: tuple[tuple[int, ...], ...]
    """Key columns present in each type."""
    boundaries: tuple[tuple[tuple[int, float], ...], ...]
    """Per type, (key column of a chunk's last layer, spanning bytes per token) for its chunks."""
    cuts: tuple[tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...]], ...]
    """Per type, the (key column, spanning bytes per token) of the cut before each chunk that receives
    (all but the pipeline's first) and of the cut after each chunk that sends (all but its last)."""
    chunk_counts: tuple[np.ndarray, ...]
    """Per type, layers of each key in each of its first rank's chunks (chunks x keys)."""


def layer_keys(table: CostTable, cfg: ParallelConfig) -> np.ndarray:
    """Key of every layer: group·3 + recompute code (layers that cannot recompute use 'none')."""
    if cfg.layer_recompute is not None:
        codes = np.array([RECOMPUTE_CODES.index(x) for x in cfg.layer_recompute])
    else:
        codes = RECOMPUTE_CODES.index(cfg.recompute)
    return table.layer_group * 3 + np.where(table.recomputable, codes, 0)


def _row(cost: LayerCost) -> list[float]:
    return [getattr(cost, f) for f in _SUMMED] + [cost.comm_link_s[k] for k in LINKS]


def _key_costs(table: CostTable, present: np.ndarray, local: Callable[[str], LocalConfig]) -> tuple:
    """(summed-field matrix, work, params, out bytes, work's stored bytes) of each present key, memoised in the table."""
    codes = sorted({RECOMPUTE_CODES[k % 3] for k in present.tolist()})
    views = {code: local(code) for code in codes}
    memo_key = (present.tobytes(), tuple(views[c] for c in codes))
    hit = table.memo.get(memo_key)
    if hit is None:
        costs = [table.cost(k // 3, views[RECOMPUTE_CODES[k % 3]]) for k in present.tolist()]
        hit = (np.array([_row(c) for c in costs]), [c.work_bytes for c in costs], [c.params for c in costs], [c.out_bytes for c in costs],
               [c.work_stored_bytes for c in costs])
        table.memo[memo_key] = hit
    return hit


def _fold(table: CostTable, signature: object, sizes: tuple[int, ...], pp: int, vpp: int, inverse: np.ndarray, cum: np.ndarray) -> _Fold:
    """Group ranks with the same layers and chunk ends into types (memoised per split)."""
    key = ("fold", signature, sizes, pp)
    hit = table.memo.get(key)
    if hit is not None:
        return hit
    bounds = table.bounds(sizes)
    per_chunk = cum[bounds[1:]] - cum[bounds[:-1]]
    types: dict[tuple, int] = {}
    rank_type, rows, first, count, boundaries, chunk_counts, cuts = [], [], [], [], [], [], []
    for r in range(pp):
        idx = list(range(r, pp * vpp, pp))
        row = per_chunk[idx].sum(axis=0)
        ends = tuple((int(inverse[bounds[k + 1] - 1]), float(table.cut_extra_bytes_per_token[bounds[k + 1] - 1])) for k in idx if bounds[k + 1] > bounds[k])
        cut = tuple(_cut(table, inverse, bounds[k]) for k in idx if 0 < bounds[k] < bounds[k + 1]), \
            tuple(_cut(table, inverse, bounds[k + 1]) for k in idx if bounds[k] < bounds[k + 1] < bounds[-1])
        t = types.setdefault((row.tobytes(), ends, cut), len(types))
        if t == len(rows):
            rows.append(row)
            first.append(r)
            count.append(0)
            boundaries.append(ends)
            chunk_counts.append(per_chunk[idx])
            cuts.append(cut)
        count[t] += 1
        rank_type.append(t)
    counts = np.array(rows)
    used = tuple(tuple(int(j) for j in np.flatnonzero(row)) for row in counts)
    hit = table.memo[key] = _Fold(tuple(rank_type), tuple(first), tuple(count), counts, used, tuple(boundaries), tuple(cuts), tuple(chunk_counts))
    return hit


def _cut(table: CostTable, inverse: np.ndarray, start: int) -> tuple[int, float]:
    """(key column of the layer before ``start``, bytes per token of the edges spanning the cut there)."""
    return int(inverse[start - 1]), float(table.cut_extra_bytes_per_token[start - 1])


def _type_extras(table: CostTable, fold: _Fold, works: tuple[list, list], largest: list, out: list, tokens: float,
                 act: np.ndarray, present: np.ndarray) -> list[tuple]:
    """(largest transient work bytes, largest layer's parameters, largest boundary bytes, largest
    layer's stored activations, largest transient but the head's, received bytes, sent bytes, sent bytes
    the sending layers keep, :attr:`RankSums.work_stored_bytes`) of each rank type from the keys'
    transients and the stored bytes each holds again (``works``), memoised per fold, key costs and
    tokens (the objects live in ``table.memo``)."""
    work, again = works
    key = ("extras", id(fold), id(work), tokens)
    hit = table.memo.get(key)
    if hit is None:
        body = [0.0 if isinstance(table.groups[k // 3], HeadLayer) else w for k, w in zip(present.tolist(), work)]
        kept = [o if keeps_output(table, k) else 0.0 for k, o in zip(present.tolist(), out)]
        hit = table.memo[key] = [
            (max((work[j] for j in used), default=0.0), max((largest[j] for j in used), default=0.0),
             max((out[k] + extra * tokens for k, extra in ends), default=0.0), max((float(act[j]) for j in used), default=0.0),
             max((body[j] for j in used), default=0.0),
             sum(out[k] + extra * tokens for k, extra in recv), sum(out[k] + extra * tokens for k, extra in send),
             sum(kept[k] for k, _ in send),
             (stored_in_work([work[j] for j in used], [again[j] for j in used]), stored_in_work([body[j] for j in used], [again[j] for j in used])))
            for used, ends, (recv, send) in zip(fold.used, fold.boundaries, fold.cuts)
        ]
    return hit


def chunk_peaks(table: CostTable, counts: np.ndarray, present: np.ndarray, works: tuple[list, list],
                largest: list) -> tuple[tuple[float, float, float, float, float], ...]:
    """:attr:`RankSums.chunk_peaks` of one rank type from its layers of each key in each chunk
    (``counts``, chunks x keys), the keys' transients and the stored bytes each holds again
    (``works``, as :func:`_type_extras`) and their layers' parameters (``largest``)."""
    work, again = works
    body = [0.0 if isinstance(table.groups[k // 3], HeadLayer) else w for k, w in zip(present.tolist(), work)]
    out = []
    for row in counts:
        used = [int(j) for j in np.flatnonzero(row)]
        ws, bs, rs = [work[j] for j in used], [body[j] for j in used], [again[j] for j in used]
        out.append((max(ws, default=0.0), max(bs, default=0.0), stored_in_work(ws, rs), stored_in_work(bs, rs),
                    max((largest[j] for j in used), default=0.0)))
    return tuple(out)


def keeps_output(table: CostTable, key: int) -> bool:
    """Whether the layers of ``key`` keep their own output among their stored activations: a
    recomputed traced layer does (``costmodel.layer_other.generic_cost``: its output is the next
    layer's checkpointed input). Where such a layer ends a chunk, that output is the tensor the chunk
    sends, which ``PipelineStage`` keeps in ``fwd_cache`` (torch 2.13 pipelining/stage.py): one
    tensor. Measured with torch's tracker on the differential sweep's CNN (pp 2, GPipe, full
    recompute, two micro-batches of 4, case d0080): the first stage holds 16 KiB of its two
    micro-batches' outputs at its peak, where each stage output counted as a layer's and as sent
    priced 24. A layer that is not recomputed keeps it where its saved tensors hold its whole output
    (``GenericLayer.saves_output``: the CNN block's final ReLU saves its result; case d0014 at draw
    seed 1, pp 2, GPipe: the first stage holds each micro-batch's 1 KiB output once)."""
    layer = table.groups[key // 3]
    return isinstance(layer, GenericLayer) and (RECOMPUTE_CODES[key % 3] != "none" or layer.saves_output)


def stored_in_work(works: list[float], again: list[float]) -> float:
    """How much of the largest of the layers' transients ``works`` their own stored activations
    already hold: the largest transient less the largest of what each layer's backward adds to the
    activations held, its transient less the stored bytes it holds again (``again``:
    ``LayerCost.work_stored_bytes``, a recomputed layer's stored tensors its recomputation reuses,
    ``costmodel.activations.recomputed_stored_bytes``). Measured with torch's tracker on the
    differential sweep's custom model (pp 4, cp 2, ZeRO 0, one micro-batch, case d0218): the second
    stage, one selectively recomputed block, peaks in its attention backward with 13.0 KiB of forward
    activations (4.0 of them the stage output) and 58.6 of temporaries, 71.6 KiB, where the block's
    25 KiB of stored activations beside its 65 KiB transient priced 94.0."""
    if not works:
        return 0.0
    return max(works) - max(max(w - a, 0.0) for w, a in zip(works, again))


def backward_curve(acts: np.ndarray, works: np.ndarray, params: np.ndarray, recomputed: np.ndarray,
                   peak_grads: np.ndarray | None = None, reduced: np.ndarray | None = None) -> tuple[tuple[float, ...], ...]:
    """The points of a chunk's backward (:attr:`RankSums.backward_curve`) from its layers' stored
    activations, transients, parameters and recompute flags in forward order: at layer ``i``'s
    backward autograd still holds the saved activations of layers ``0..i-1`` and, of the layer
    itself, its stored activations and its backward's transient, or, where it is recomputed, the
    larger of its stored and its recomputed activations (its transient), and the gradients of
    layers ``i+1..`` exist (PyTorch frees a node's saved tensors once its backward has run; FSDP2
    reduce-scatters each unit's gradients as its backward ends: torch 2.13 ``FSDPParamGroup.post_backward``).
    Each point also names the parameters of the layer, of the next one (prefetched) and of the layer
    back-propagated just before (whose reduce-scatter input is still held), and ``peak_grads``: the
    parameters whose gradient the layer's backward has made by its peak (:func:`_peak_grad_params`;
    its parameters where not given). ``reduced``: the parameters of the unit each layer's backward
    reduces last, whose fp32 reduce-scatter input the next layer's backward holds (its parameters
    where not given; :func:`_reduced_last_params`). Of the points with the same four, only the upper convex hull of (parameters done, activations) can be the largest of
    ``acts + g(params_done)`` for a convex piecewise-linear ``g``: the gradients and reduce outputs
    done, less the gathered parameters freed (``costmodel.rank_phases.layer_by_layer_end``), which can
    fall with the parameters done."""
    own = np.where(recomputed, np.maximum(acts, works), acts + works)
    held = (np.cumsum(acts) - acts + own)[::-1]
    back = params[::-1]
    last = (params if reduced is None else reduced)[::-1]
    done = np.concatenate([[0.0], np.cumsum(back)[:-1]])
    nxt = np.concatenate([back[1:], [0.0]])
    grads = (params if peak_grads is None else peak_grads)[::-1]
    groups: dict[tuple[float, float, float, float], list[tuple[float, float]]] = {}
    for k in range(len(back)):
        key = (float(back[k]), float(nxt[k]), float(done[k] and last[k - 1]), float(grads[k]))
        groups.setdefault(key, []).append((float(done[k]), float(held[k])))
    return tuple((y, d, *g) for g, points in sorted(groups.items()) for d, y in _upper_hull(sorted(points)))


def _upper_hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points of ``points`` (sorted by x, then y) that maximise ``y + c x`` for some ``c`` (the
    upper convex hull, monotone chain)."""
    hull: list[tuple[float, float]] = []
    for d, y in points:
        while hull and hull[-1][0] == d:  # the same x, a lower y
            hull.pop()
        while len(hull) >= 2 and (hull[-1][0] - hull[-2][0]) * (y - hull[-2][1]) >= (hull[-1][1] - hull[-2][1]) * (d - hull[-2][0]):
            hull.pop()
        hull.append((d, y))
    return hull


def _curves(table: CostTable, fold: _Fold, bounds: np.ndarray, keys: tuple[np.ndarray, np.ndarray], matrix: np.ndarray,
            work: list, vpp: int, split_experts: bool = False) -> list[tuple[tuple[float, ...], ...]]:
    """:func:`backward_curve` of each rank type's first rank (empty under interleaving, and where
    ``vpp`` is 0: engines other than the native runtime), memoised per fold and key costs;
    ``split_experts``: :func:`_reduced_last_params`."""
    if vpp != 1:  # interleaved, or an engine that does not read them (vpp 0)
        return [()] * len(fold.first_rank)
    present, inverse = keys
    key = ("curve", id(fold), id(work), split_experts)
    hit = table.memo.get(key)
    if hit is None:
        act, params, w = matrix[:, _SUMMED.index("act_bytes")], matrix[:, _SUMMED.index("params")], np.array(work)
        recomputed = np.array([RECOMPUTE_CODES[k % 3] != "none" for k in present.tolist()], dtype=bool)
        peak = _peak_grad_params(table, present, params)
        reduced = _reduced_last_params(params, matrix[:, _SUMMED.index("expert_params")], split_experts)
        cols = [inverse[bounds[r]:bounds[r + 1]] for r in fold.first_rank]
        hit = table.memo[key] = [backward_curve(act[c], w[c], params[c], recomputed[c], peak[c], reduced[c]) for c in cols]
    return hit


def _reduced_last_params(params: np.ndarray, experts: np.ndarray, split_experts: bool) -> np.ndarray:
    """Parameters of the FSDP2 unit each layer key's backward reduces last: the layer's, or under
    expert parallelism (``split_experts``: ``planner.runtime.fsdp`` makes each MoE block's local
    experts a unit of their own) the block's other parameters, whose unit's ``post_backward`` runs at
    the end of the block's backward, after its experts' (an MoE block's experts back-propagate before
    its attention). Its fp32 reduce-scatter input is the one held through the next layer's backward:
    the units of a root share one list of reduce-scatter states capped at one input buffer, so the
    block's reduce frees its experts' input (torch 2.13 ``FSDPCommContext.reduce_scatter_states``,
    ``reduce_scatter_max_input_buffers``, ``_fsdp_param_group.py``). Measured with torch's tracker on
    the differential sweep's Mixtral (pp 2, cp 2, ep 2, ZeRO 0, full recompute, one micro-batch, case
    d0118 at draw seed 1): the first stage peaks in its first block's recomputed forward beside the
    second block's 12.75 KiB non-expert input (4 B x 3,264), freed at the first block's experts'
    reduce; the whole block's 60.75 KiB priced +11.0 %."""
    return params - experts if split_experts else params


def _peak_grad_params(table: CostTable, present: np.ndarray, params: np.ndarray) -> np.ndarray:
    """Parameters of each layer key whose gradient exists at the peak of the layer's own backward: all
    of them but a MoE block's and the head's, whose backwards peak at their first step, before any
    weight gradient: the experts' weighted combine (``costmodel.activations.moe_combine_backward_bytes``;
    measured with torch's tracker on the differential sweep's Mixtral, tp 2, pp 4, case d0221: the
    peak at the combine's ``index_put`` backward beside no gradient) and the loss (the sweep's custom
    model, pp 4, cp 2, ZeRO 2, case d0229: the last stage's peak at ``_log_softmax_backward_data``,
    no gradient). A dense block peaks later: measured on the sweep's Llama (tp 2, cp 4, ZeRO 2, full
    recompute, case d0000), inside its MLP norm's backward beside the MLP's three bf16 weight gradients."""
    first = [isinstance(g, HeadLayer) or (isinstance(g, TransformerLayer) and g.is_moe) for g in (table.groups[k // 3] for k in present.tolist())]
    return np.where(np.array(first, dtype=bool), 0.0, params)


def rank_costs(table: CostTable, cfg: ParallelConfig, local: Callable[[str], LocalConfig]) -> Ranks:
    """Per-rank-type sums for ``cfg``; ``local(recompute)`` gives the per-layer view of the config."""
    signature = cfg.layer_recompute or cfg.recompute
    present, inverse, cum = table.key_prefix(signature, lambda: layer_keys(table, cfg))
    matrix, work, largest, out, again = _key_costs(table, present, local)
    sizes = cfg.stage_layers or table.default_split(cfg.pp * cfg.vpp)
    fold = _fold(table, signature, sizes, cfg.pp, cfg.vpp, inverse, cum)
    sums = (fold.counts @ matrix).tolist()
    n = len(_SUMMED)
    act = matrix[:, _SUMMED.index("act_bytes")]
    extras = _type_extras(table, fold, (work, again), largest, out, local("none").tokens, act, present)
    chunk_acts = [tuple((c @ act).tolist()) if cfg.vpp > 1 else () for c in fold.chunk_counts]
    weights = matrix[:, _SUMMED.index("params")]  # experts included
    chunk_params = [tuple((c @ weights).tolist()) if cfg.vpp > 1 else () for c in fold.chunk_counts]
    peaks = [chunk_peaks(table, c, present, (work, again), largest) if cfg.vpp > 1 else () for c in fold.chunk_counts]
    native = cfg.engine == "native"  # only the native runtime's end of a backward is priced layer by layer
    curves = _curves(table, fold, table.bounds(sizes), (present, inverse), matrix, work, cfg.vpp if native else 0, cfg.ep > 1)
    types = tuple(
        RankSums(*row[:n], links=dict(zip(LINKS, row[n:])), work_bytes=w, largest_layer_params=p, boundary_bytes=b,
                 body_work_bytes=bw, largest_layer_act_bytes=a, recv_bytes=i, send_bytes=o, kept_send_bytes=ko,
                 chunk_act_bytes=c, chunk_params=q, backward_curve=k, work_stored_bytes=ws, chunk_peaks=cp)
        for row, (w, p, b, a, bw, i, o, ko, ws), c, q, k, cp in zip(sums, extras, chunk_acts, chunk_params, curves, peaks)
    )
    return Ranks(table.bounds(sizes), fold.rank_type, types, fold.first_rank, fold.count)
