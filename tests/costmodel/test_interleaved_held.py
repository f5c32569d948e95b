"""Activations an interleaved-1F1B rank holds (``costmodel.memory.interleaved_held_act_bytes``): the
schedule's own chunk order, checked against a literal replay of Megatron-LM's order and against
``in_flight_microbatches`` for chunks of one depth."""

from __future__ import annotations

import pytest

from costmodel.memory import in_flight_microbatches, interleaved_held_act_bytes


def _replay(chunk_act: tuple[float, ...], pp: int, rank: int, m: int) -> float:
    """Every forward and backward of the step, in Megatron-LM's order, the held set's largest sum."""
    v = len(chunk_act)
    warm = min(m * v, 2 * (pp - rank - 1) + (v - 1) * pp + 1)
    held, peak, f, b = 0.0, 0.0, 0, 0
    while b < m * v:
        if f < m * v and (f < warm or f - b < warm):
            held += chunk_act[(f // pp) % v]
            f += 1
            peak = max(peak, held)
        else:
            held -= chunk_act[v - 1 - (b // pp) % v]
            b += 1
    return peak


@pytest.mark.parametrize("pp,rank,m", [(2, 0, 8), (2, 1, 8), (4, 0, 16), (4, 3, 32), (2, 0, 2)])
def test_equal_chunks_hold_the_warm_up(pp: int, rank: int, m: int) -> None:
    v = 4
    flight = in_flight_microbatches("interleaved-1f1b", rank, pp, v, m)
    assert interleaved_held_act_bytes((3.0,) * v, pp, rank, m) == pytest.approx(flight * v * 3.0)


@pytest.mark.parametrize("pp,rank,m", [(2, 0, 8), (2, 1, 8), (4, 0, 16), (4, 2, 64), (2, 0, 2)])
def test_unequal_chunks_follow_the_schedule(pp: int, rank: int, m: int) -> None:
    """The 8B reproduction's rank 0 (embedding and three blocks, then seven chunks of two): the deep
    first chunk is in flight more often than its share of the warm-up."""
    chunks = (3.2, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0)
    held = interleaved_held_act_bytes(chunks, pp, rank, m)
    assert held == pytest.approx(_replay(chunks, pp, rank, m))
    average = in_flight_microbatches("interleaved-1f1b", rank, pp, len(chunks), m) * sum(chunks)
    assert held >= average
    assert (held > average) == (m * len(chunks) > 2 * (pp - rank - 1) + (len(chunks) - 1) * pp + 1)  # a steady state runs
