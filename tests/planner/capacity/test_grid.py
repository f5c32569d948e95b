"""Parsing the sweep grid as typed: ranges of powers of two, lists, auto batches, amounts, durations."""

from __future__ import annotations

import pytest

from planner.errors import InputError
import planner.capacity.grid as grid


def test_counts_ranges_and_lists() -> None:
    assert grid.parse_counts("64..4096", "--gpus") == (64, 128, 256, 512, 1024, 2048, 4096)
    assert grid.parse_counts("48..200", "--gpus") == (64, 128)  # powers of two inside the range
    assert grid.parse_counts("96,64, 96,8..16", "--gpus") == (8, 16, 64, 96)  # sorted, distinct, mixed


@pytest.mark.parametrize(("text", "message"), [
    ("4096..64", "empty range"), ("65..127", "holds no power of two"), ("", "empty item"), ("64,,128", "empty item"),
    ("sixty", "not a whole number"), ("0", "must be positive"), ("-8", "must be positive"),
])
def test_bad_counts(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        grid.parse_counts(text, "--gpus")
    assert "\n" not in str(err.value)


def test_batches_fixed_auto_and_ranges() -> None:
    assert grid.parse_batches("512,1024", None) == grid.BatchChoice(fixed=(512, 1024))
    auto = grid.parse_batches("auto", 1000)
    assert auto.chosen_per_point and auto.candidates == (256, 512, 1024, 2048)  # powers of two within 4x of 1000
    assert grid.parse_batches("256..2048", 512).candidates == (256, 512, 1024, 2048)
    with pytest.raises(InputError, match="needs --critical-batch"):
        grid.parse_batches("auto", None)
    with pytest.raises(InputError, match="not both"):
        grid.parse_batches("256..1024,64", 512)


def test_amounts_durations_and_prices() -> None:
    assert grid.parse_amount("2T", "--tokens") == 2e12 and grid.parse_amount("500B", "--tokens") == 5e11
    assert grid.parse_amount("1.5e12", "--tokens") == 1.5e12
    assert grid.parse_duration("30d") == 30 * 86400 and grid.parse_duration("12h") == 43200 and grid.parse_duration("2w") == 14 * 86400
    assert grid.parse_prices("2.5", ("a", "b")) == {"a": 2.5, "b": 2.5}
    assert grid.parse_prices("2.5,4", ("a", "b")) == {"a": 2.5, "b": 4.0}
    for bad, call in (("2 trillion", lambda t: grid.parse_amount(t, "--tokens")), ("30 days", grid.parse_duration),
                      ("1,2,3", lambda t: grid.parse_prices(t, ("a", "b"))), ("-1", lambda t: grid.parse_prices(t, ("a",)))):
        with pytest.raises(InputError):
            call(bad)


def test_gpu_counts_a_cluster_can_hold() -> None:
    assert grid.holdable_problem(64, 8, "dgx-h100") is None and grid.holdable_problem(4, 8, "dgx-h100") is None
    assert "does not fill whole gb200-nvl72 nodes of 72 GPUs" in grid.holdable_problem(128, 72, "gb200-nvl72")
    assert grid.holdable_problem(12, 8, "dgx-h100") is not None and grid.holdable_problem(3, 8, "dgx-h100") is not None
