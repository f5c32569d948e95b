"""Which chunks a pipeline rank's no-sync backwards keep gathered, and what it holds, at each of its
backwards: the states ``costmodel.rank_phases.peak_phase`` prices where the native runtime runs a
chunk's backwards but its last micro-batch's without gradient sync or resharding. Split from
``costmodel.rank_phases``; every term names its source here.

The rank's backwards follow Megatron-LM's interleaved order (``schedules.py``
``get_model_chunk_id``; torch's ``ScheduleInterleaved1F1B`` runs the same, as the memory check's
``planner.runtime.memcheck.step.schedule_actions``): backward ``i`` runs chunk
``v - 1 - (i // pp) mod v``, micro-batch ``(i // (pp v)) pp + i mod pp``, and after the warm-up's
forwards each backward is followed by the next forward while forwards are left.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from costmodel.ranks import RankSums
from costmodel.specs import ParallelConfig


def _chunks(cfg: ParallelConfig) -> int:
    return cfg.vpp if cfg.pp > 1 else 1


def backward_micro(cfg: ParallelConfig, i: int) -> int:
    """The micro-batch of a rank's backward ``i`` (see the module docstring)."""
    return (i // (cfg.pp * _chunks(cfg))) * cfg.pp + i % cfg.pp


def nosync_chunks(cfg: ParallelConfig, t: RankSums, j: int) -> tuple[float, float, bool]:
    """(share of the rank's parameters kept gathered beside unsharded fp32 accumulators, share
    reduced into sharded gradients, whether backward ``j``'s chunk is among the gathered) before
    backward ``j`` where pipelined FSDP2 runs every backward of a chunk but its last micro-batch's
    without gradient sync or resharding (torch 2.13 ``pipelining/stage.py``
    ``backward_maybe_with_nosync``: ``set_reshard_after_backward(False)``,
    ``set_requires_gradient_sync(False)``; ``_fsdp_param_group.py`` ``post_backward`` keeps the
    unsharded parameters and ``_fsdp_param.py`` ``to_accumulated_grad_if_needed`` upcasts the
    gradient to the fp32 ``reduce_dtype``): a chunk is gathered from its first backward (``g pp``
    for chunk ``v - 1 - g``) to its last (micro-batch ``m - 1``: backward
    ``((m - 1) // pp) pp v + g pp + (m - 1) mod pp``), which reduce-scatters and reshards it.
    Measured with torch's tracker on the differential sweep's Mixtral (pp 2, v 2, two micro-batches,
    case d0272): the first rank's first backward holds its running chunk's two blocks gathered and
    no other (108.8 KiB), where every chunk kept gathered at 6 B per parameter priced 19 % over."""
    v, pp, m = _chunks(cfg), cfg.pp, cfg.num_microbatches
    weights = t.chunk_params if v > 1 and t.chunk_params else (1.0,) * v
    last = ((m - 1) // pp) * pp * v + (m - 1) % pp
    kept = reduced = 0.0
    for g in range(v):
        chunk = v - 1 - g
        if last + g * pp < j:
            reduced += weights[chunk]
        elif g * pp < j:
            kept += weights[chunk]
    total = sum(weights) or 1.0
    g = (j // pp) % v
    running = g * pp < j <= last + g * pp
    return kept / total, reduced / total, running


def _order_sum(chunk_act: tuple[float, ...], pp: int, count: int, backward: bool) -> float:
    """Activation bytes of the first ``count`` chunk-micro-batches in the forward (chunk ``(i // pp)
    mod v``) or backward (chunk ``v - 1 - (i // pp) mod v``) order."""
    v = len(chunk_act)
    period, rest = divmod(count, pp * v)
    total = period * pp * sum(chunk_act)
    for g in range(rest // pp + 1):
        n = min(pp, rest - g * pp)
        if n > 0:
            total += n * chunk_act[v - 1 - g if backward else g]
    return total


def round_held_bytes(cfg: ParallelConfig, t: RankSums, warm: int, j: int, sent: float) -> float:
    """The activations an interleaved rank holds at the start of its backward ``j``: the
    chunk-micro-batches its ``warm`` warm-up forwards and the one forward after each earlier backward
    left in flight (``costmodel.memory.interleaved_held_act_bytes``' order), each with its share of
    the stage outputs ``sent`` per micro-batch (``costmodel.rank_memory._held_act_bytes``)."""
    n = cfg.num_microbatches * len(t.chunk_act_bytes)
    forwards = min(warm + j, n)
    acts = _order_sum(t.chunk_act_bytes, cfg.pp, forwards, False) - _order_sum(t.chunk_act_bytes, cfg.pp, j, True)
    return max(acts, 0.0) + (forwards - j) * sent / len(t.chunk_act_bytes)


def later_rounds(cfg: ParallelConfig, t: RankSums, first: int) -> list[int]:
    """The interleaved rank's backwards after ``first`` whose no-sync states can be its peak: every one,
    or, in a long step, the first two periods of ``pp v`` backwards after ``first`` and the last two
    (between them every chunk stays gathered and the held set repeats each period: each chunk's last
    backward is among the last ``pp v``). None without interleaving (one chunk: the stage's first and
    last backwards, ``costmodel.rank_phases.peak_phase``)."""
    v = _chunks(cfg)
    if v == 1 or not t.chunk_act_bytes:
        return []
    n, period = cfg.num_microbatches * v, cfg.pp * v
    if n - first <= 4 * period:
        return list(range(first + 1, n))
    return list(range(first + 1, first + 2 * period)) + list(range(n - 2 * period, n))


def running_chunk(cfg: ParallelConfig, t: RankSums, j: int, unit: float) -> tuple[RankSums, float]:
    """The rank as its backward ``j`` meets it: its transients and largest layer those of the chunk
    that backward runs (:attr:`RankSums.chunk_peaks`), and ``unit`` (the bytes of the rank's largest
    unit's bf16 parameters) scaled to that chunk's largest unit; the rank itself where the chunks
    are not told apart."""
    if not t.chunk_peaks or not t.largest_layer_params:
        return t, unit
    work, body, stored, body_stored, largest = t.chunk_peaks[_chunks(cfg) - 1 - (j // cfg.pp) % _chunks(cfg)]
    chunk = replace(t, work_bytes=work, body_work_bytes=body, work_stored_bytes=(stored, body_stored), largest_layer_params=largest)
    return chunk, unit * largest / t.largest_layer_params


def peak_round(cfg: ParallelConfig, t: RankSums, first: int, warm: int, sent: float, grads: float,
               nosync: tuple[float, float]) -> int | None:
    """The backward of :func:`later_rounds` whose start holds the most, as
    ``costmodel.rank_phases.peak_phase`` prices it (the held activations, the running chunk's
    transient and unit, the gathered and reduced chunks), over all of them at once; None where there
    are none. ``grads``: the rank's sharded gradient bytes; ``nosync``: bytes per gathered parameter
    and of the largest unit's bf16 parameters."""
    rounds = np.array(later_rounds(cfg, t, first), dtype=np.int64)
    if not rounds.size or not t.chunk_peaks or not t.largest_layer_params:
        return None
    v, pp, m = _chunks(cfg), cfg.pp, cfg.num_microbatches
    acts, weights = np.array(t.chunk_act_bytes), np.array(t.chunk_params or (1.0,) * v)
    groups = np.arange(v)  # group g runs chunk v - 1 - g, first at backward g pp, last at ((m - 1) // pp) pp v + g pp + (m - 1) mod pp
    last = ((m - 1) // pp) * pp * v + (m - 1) % pp + groups * pp
    share = weights[::-1] / (weights.sum() or 1.0)  # by group
    done = last[None, :] < rounds[:, None]
    kept = ((groups[None, :] * pp < rounds[:, None]) & ~done) @ share
    reduced = done @ share
    g = (rounds // pp) % v
    running = (g * pp < rounds) & (rounds <= last[g])
    forwards = np.minimum(warm + rounds, m * v)
    held = np.maximum(_order_sums(acts, pp, forwards, False) - _order_sums(acts, pp, rounds, True), 0.0) + (forwards - rounds) * sent / v
    peaks = np.array(t.chunk_peaks)[v - 1 - g]
    work, body, own = peaks[:, 0] - peaks[:, 2], peaks[:, 1] - peaks[:, 3], nosync[1] * peaks[:, 4] / t.largest_layer_params
    transient = np.where(running, work + own, np.maximum(work, body + 3 * own))
    total = held + transient + grads * reduced + nosync[0] * t.params * kept
    return int(rounds[int(np.argmax(total))])


def _order_sums(chunk_act: np.ndarray, pp: int, counts: np.ndarray, backward: bool) -> np.ndarray:
    """:func:`_order_sum` of each of ``counts``."""
    v = len(chunk_act)
    order = chunk_act[::-1] if backward else chunk_act
    prefix = np.concatenate([[0.0], np.cumsum(np.repeat(order, pp))])  # one period of pp v chunk-micro-batches
    period, rest = np.divmod(counts, pp * v)
    return period * prefix[-1] + prefix[rest]
