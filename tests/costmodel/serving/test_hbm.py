"""HBM fraction by transfer size (costmodel/serving/hbm.py, Calculon SC'23 memory table)."""

from __future__ import annotations

import pytest

from costmodel.serving.hbm import calculon_fraction, stream_seconds, transfer_scale


def test_the_table_points_are_calculons() -> None:
    assert calculon_fraction(1e5) == 0.30 and calculon_fraction(1e6) == pytest.approx(0.60)
    assert calculon_fraction(1e7) == pytest.approx(0.75) and calculon_fraction(1e9) == 0.90
    assert 0.75 < calculon_fraction(3e7) < 0.90 and transfer_scale(1e9) == 1.0


def test_splitting_a_stream_over_more_kernels_makes_it_slower() -> None:
    """A tp 8 layer of a 70B model reads ~107 MB over four GEMMs of ~27 MB each, below the large-stream rate."""
    one = stream_seconds(107e6, 1, 4.8e12)
    four = stream_seconds(107e6, 4, 4.8e12)
    assert one == pytest.approx(107e6 / 4.8e12) and four > 1.05 * one
    assert stream_seconds(0.0, 4, 4.8e12) == 0.0
