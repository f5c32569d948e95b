"""The no-sync states of an interleaved rank at each of its backwards (``costmodel.nosync_rounds``)
and the later backwards ``costmodel.rank_phases.peak_phase`` prices them at: measured with torch's
tracker on the differential sweep's CNN (tp 4, pp 2, v 3, ZeRO 3, two micro-batches of 4, selective
recompute, case d0064 at draw seed 1), the last rank peaks in its fourth backward, the strided
block's last, with that block's 7.1 KiB of bf16 parameters and its fp32 accumulators gathered,
141.8 KiB, where its first backwards alone priced 3.7 % under."""

from __future__ import annotations

from dataclasses import replace

import pytest

from costmodel.nosync_rounds import backward_micro, later_rounds, nosync_chunks, peak_round, round_held_bytes, running_chunk
from costmodel.rank_phases import _nosync_start, backward_start, held_bytes, peak_phase
from costmodel.ranks import RankSums
from costmodel.specs import ParallelConfig

KIB = 1024.0


def _cfg(pp: int = 2, vpp: int = 3, m: int = 2) -> ParallelConfig:
    return ParallelConfig(tp=1, pp=pp, vpp=vpp, micro_batch=1, global_batch=m, seq_len=16, engine="native", zero=3,
                          schedule="interleaved-1f1b", sp=False)


def _loop(cfg: ParallelConfig, weights: tuple[float, ...], j: int) -> tuple[float, float, bool]:
    """The states by walking backwards ``0 .. j - 1`` one by one (the module docstring's order)."""
    v = cfg.vpp
    ran, done = set(), set()
    for i in range(j):
        chunk = v - 1 - (i // cfg.pp) % v
        ran.add(chunk)
        if backward_micro(cfg, i) == cfg.num_microbatches - 1:
            done.add(chunk)
    total = sum(weights)
    return sum(weights[c] for c in ran - done) / total, sum(weights[c] for c in done) / total, v - 1 - (j // cfg.pp) % v in ran - done


SUMS = RankSums(fwd_s=0.0, bwd_s=0.0, recompute_s=0.0, exposed_s=0.0, hidden_s=0.0, act_bytes=6.02 * KIB, params=4874.5,
                expert_params=0.0, links={}, work_bytes=28.06 * KIB, largest_layer_params=3648.0, boundary_bytes=4 * KIB,
                body_work_bytes=28.06 * KIB, largest_layer_act_bytes=4 * KIB, recv_bytes=10 * KIB, send_bytes=6 * KIB,
                kept_send_bytes=6 * KIB, chunk_act_bytes=(4 * KIB, 2 * KIB, 0.02 * KIB), chunk_params=(1184.0, 3648.0, 42.5),
                chunk_peaks=((28.06 * KIB, 28.06 * KIB, 0.0, 0.0, 1184.0), (16.06 * KIB, 16.06 * KIB, 0.0, 0.0, 3648.0),
                             (0.1 * KIB, 0.0, 0.0, 0.0, 42.5)))
"""d0064's last rank as the cost model sums it (its blocks 1 and 3 and the head's TP share, one chunk each)."""


@pytest.mark.parametrize(("pp", "vpp", "m"), [(2, 2, 2), (2, 3, 2), (2, 2, 4), (4, 2, 8), (3, 3, 6)])
def test_the_closed_form_states_follow_the_schedule(pp: int, vpp: int, m: int) -> None:
    cfg = _cfg(pp, vpp, m)
    t = replace(SUMS, chunk_params=tuple(float(10 + 7 * c) for c in range(vpp)))
    for j in range(m * vpp + 1):
        assert nosync_chunks(cfg, t, j) == pytest.approx(_loop(cfg, t.chunk_params, j))


@pytest.mark.parametrize(("pp", "vpp", "m", "warm"), [(2, 3, 2, 5), (2, 2, 4, 3), (4, 2, 8, 11), (3, 3, 6, 8)])
def test_the_held_set_counts_the_forwards_less_the_backwards(pp: int, vpp: int, m: int, warm: int) -> None:
    acts = tuple(float(1 + 3 * c) for c in range(vpp))
    t, n = replace(SUMS, chunk_act_bytes=acts), m * vpp
    forward, backward = [acts[(i // pp) % vpp] for i in range(n)], [acts[vpp - 1 - (i // pp) % vpp] for i in range(n)]
    for j in range(n):
        ran = min(warm + j, n)
        assert round_held_bytes(_cfg(pp, vpp, m), t, warm, j, 0.0) == pytest.approx(sum(forward[:ran]) - sum(backward[:j]))


def test_a_long_step_prices_two_periods_at_each_end() -> None:
    assert later_rounds(_cfg(2, 3, 2), SUMS, 1) == [2, 3, 4, 5]
    long = later_rounds(_cfg(2, 2, 64), replace(SUMS, chunk_act_bytes=(1.0, 1.0)), 3)
    assert long[:3] == [4, 5, 6] and long[-1] == 127 and len(long) == 7 + 8
    assert later_rounds(_cfg(2, 1, 4), replace(SUMS, chunk_act_bytes=()), 1) == []


def test_a_backward_meets_its_own_chunks_transient_and_unit() -> None:
    chunk, unit = running_chunk(_cfg(), SUMS, 3, 2 * 3648.0)  # backward 3: chunk 1, the strided block's last
    assert chunk.work_bytes == 16.06 * KIB and unit == 2 * 3648.0
    chunk, unit = running_chunk(_cfg(), SUMS, 4, 2 * 3648.0)  # backward 4: chunk 0, the first block's first
    assert chunk.largest_layer_params == 1184.0 and unit == 2 * 1184.0


def test_the_strided_blocks_last_backward_is_priced() -> None:
    """The fourth backward (chunk 1, micro-batch 1) holds the 10 KiB of three chunk-micro-batches, the
    block's transient, its 6 B per parameter gathered and the head's reduced gradient; the priced peak
    covers it, where the first backward's states alone did not."""
    cfg = _cfg()
    held, grads, nosync = 12.02 * KIB, 4 * 4874.5, (6.0, 2 * 3648.0)
    kept, reduced, running = nosync_chunks(cfg, SUMS, 3)
    assert (kept, running) == (pytest.approx(3648.0 / 4874.5), True) and reduced == pytest.approx(42.5 / 4874.5)
    assert round_held_bytes(cfg, SUMS, 5, 3, 0.0) == pytest.approx(10 * KIB)
    fourth = 10 * KIB + 16.06 * KIB + 6.0 * 3648.0 + 2 * 3648.0 + grads * reduced
    phase = peak_phase(cfg, SUMS, 5 / 3, held, grads, nosync=nosync)
    assert held_bytes(phase) >= fourth - 1.0
    first_only = peak_phase(cfg, replace(SUMS, chunk_act_bytes=()), 5 / 3, held, grads, nosync=nosync)
    assert held_bytes(first_only) < fourth


@pytest.mark.parametrize(("pp", "vpp", "m", "warm"), [(2, 3, 2, 5), (2, 2, 4, 3), (4, 2, 8, 11), (2, 2, 64, 3)])
def test_the_peak_round_is_the_largest_of_the_scalar_phases(pp: int, vpp: int, m: int, warm: int) -> None:
    """``peak_round`` prices every later backward at once; each is what ``peak_phase`` builds for it."""
    t = replace(SUMS, chunk_act_bytes=tuple(float(1000 + 700 * c) for c in range(vpp)),
                chunk_params=tuple(float(500 + 300 * c) for c in range(vpp)),
                chunk_peaks=tuple((3000.0 + 500 * c, 2500.0, 100.0, 0.0, 400.0 + 100 * c) for c in range(vpp)),
                largest_layer_params=400.0 + 100 * (vpp - 1), params=sum(500 + 300 * c for c in range(vpp)))
    cfg, nosync, grads, sent = _cfg(pp, vpp, m), (6.0, 2 * (400.0 + 100 * (vpp - 1))), 9000.0, 64.0
    first = min(m * vpp - warm, (vpp - 1) * pp + 1)

    def scalar(j: int) -> float:
        at = round_held_bytes(cfg, t, warm, j, sent)
        chunk, own = running_chunk(cfg, t, j, nosync[1])
        return held_bytes(_nosync_start(chunk, backward_start(chunk, at, 0.0, None), at, grads, (nosync[0], own), nosync_chunks(cfg, t, j)))

    best = peak_round(cfg, t, first, warm, sent, grads, nosync)
    assert scalar(best) == pytest.approx(max(scalar(j) for j in later_rounds(cfg, t, first)))
