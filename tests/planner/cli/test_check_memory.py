"""``meshplan check-memory``'s table units: a rank of a few hundred KiB is shown in KiB, not as 0.00 GiB."""

from __future__ import annotations

import pytest

from planner.cli.check_memory import _size, _unit


@pytest.mark.parametrize(("gib", "unit", "shown"), [
    (79.6, "GiB", "79.60 GiB"),
    (1.0, "GiB", "1.00 GiB"),
    (0.5, "MiB", "512.00 MiB"),
    (160.0 / 1024**2, "KiB", "160.00 KiB"),
    (0.0, "KiB", "0.00 KiB"),
])
def test_unit_is_the_largest_that_shows_one_or_more(gib: float, unit: str, shown: str) -> None:
    name, scale = _unit(gib)
    assert name == unit
    assert _size(gib) == shown
    assert gib * scale >= 1.0 or unit == "KiB"
