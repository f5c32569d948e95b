"""Exposed pipeline send/receive hops (``costmodel.pipeline.p2p_exposed``): the first micro-batch's
trip through the stages and back, plus one blocking exchange each way per further micro-batch in
non-interleaved 1F1B; only the fill and drain when the exchanges overlap (interleaved, Megatron's
``overlap_p2p_comm``)."""

from __future__ import annotations

import pytest

from costmodel.pipeline import p2p_exposed


@pytest.mark.parametrize(("pp", "m", "hops"), [(2, 1, 2), (2, 4, 8), (4, 1, 6), (4, 8, 20), (1, 8, 0)])
def test_hops_on_the_critical_path(pp: int, m: int, hops: int) -> None:
    assert p2p_exposed(1.0, pp, m, 1, overlapped=False) == hops


def test_overlapped_exchanges_leave_the_fill_and_drain() -> None:
    assert p2p_exposed(1.0, 4, 8, 2, overlapped=True) == 6
