"""The backward curve keeps every point that can be a layer-by-layer end's largest moment
(``costmodel.ranks.backward_curve``): where the gathered parameters freed per parameter done outweigh
the gradients and reduce outputs (ZeRO 1-2 over four or more shards), the moment's bytes fall with the
parameters done, so the points that win for a negative slope must stay too."""

from __future__ import annotations

import itertools

import numpy as np

from costmodel.ranks import _upper_hull, backward_curve


def _best(points: list[tuple[float, float]], c: float) -> float:
    return max(y + c * x for x, y in points)


def test_the_hull_wins_for_every_slope() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        points = sorted((float(x), float(y)) for x, y in rng.integers(0, 20, size=(8, 2)))
        hull = _upper_hull(points)
        assert set(hull) <= set(points)
        for c in (-3.0, -1.0, -0.25, 0.0, 0.5, 2.0):
            assert _best(hull, c) == _best(points, c)


def test_an_early_moment_with_fewer_activations_is_kept() -> None:
    """Five equal blocks, the middle one with a large transient: the block back-propagated before it
    holds fewer bytes than it but more once each parameter done nets -1 B (the old hull, slopes >= 0
    only, dropped it)."""
    acts, works, params = np.full(5, 4.0), np.array([1.0, 1.0, 9.0, 1.0, 1.0]), np.full(5, 10.0)
    curve = backward_curve(acts, works, params, np.zeros(5, dtype=bool))
    assert (17.0, 10.0) in {(y, d) for y, d, *_ in curve}  # block 3: 12 held below it, its own 5, 10 done
    every = [(0.0, 21.0), (10.0, 17.0), (20.0, 21.0), (30.0, 9.0), (40.0, 5.0)]  # (done, held) in backward order
    for c in (-1.0, -0.2, 0.0, 1.0):
        assert max(y + c * d for y, d, *_ in curve) == max(y + c * d for d, y in every)


def test_points_of_one_abscissa_keep_the_highest() -> None:
    assert _upper_hull([(0.0, 1.0), (0.0, 3.0), (1.0, 0.0)]) == [(0.0, 3.0), (1.0, 0.0)]
    assert list(itertools.chain(*_upper_hull([(0.0, 1.0)]))) == [0.0, 1.0]
