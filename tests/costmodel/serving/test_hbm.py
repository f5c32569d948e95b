"""HBM fraction by transfer size (costmodel/serving/hbm.py, Calculon SC'23 memory table)."""

from __future__ import annotations

import pytest

from costmodel.serving.hbm import calculon_fraction, expert_stream_rate, stream_seconds, transfer_scale


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


def test_a_measured_moe_rate_below_the_dense_rate_sets_the_expert_stream() -> None:
    """aiter's block-scaled FP8 MoE streams 4091.86 GB/s on MI325X's 6000 GB/s (0.682): the experts
    stream at that rate, never faster than the dense stream, and at the dense rate without one."""
    assert expert_stream_rate(4.86e12, 6.0e12, 0.682) == pytest.approx(4.092e12)
    assert expert_stream_rate(3.0e12, 6.0e12, 0.682) == 3.0e12
    assert expert_stream_rate(4.86e12, 6.0e12, None) == 4.86e12
