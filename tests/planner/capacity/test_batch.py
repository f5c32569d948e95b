"""The gradient-noise-scale model (McCandlish et al. 2018 eq. 2.11) as the sweep uses it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.capacity.batch import relative_steps, steps_needed, time_score, tokens_needed


@given(st.integers(1, 1 << 16), st.integers(1, 1 << 16))
def test_steps_and_examples_trade_off_as_the_paper_says(batch: int, critical: int) -> None:
    """(S/S_min - 1)(E/E_min - 1) = 1 with E_min = B_crit S_min."""
    s_min = 1000.0
    steps = s_min * relative_steps(batch, critical)
    e_min = critical * s_min
    assert (steps / s_min - 1) * (steps * batch / e_min - 1) == pytest.approx(1.0)


def test_the_budget_is_stated_at_the_critical_batch() -> None:
    assert tokens_needed(2e12, 512, 512) == pytest.approx(2e12)  # E(B_crit) = 2 E_min
    assert tokens_needed(2e12, 2048, 512) == pytest.approx(2e12 * 5 / 2)  # bigger batches spend more data
    assert tokens_needed(2e12, 2048, None) == 2e12  # no critical batch: every batch trains on the budget
    assert steps_needed(2e12, 512, 4096, 512) == pytest.approx(2e12 / (512 * 4096))


def test_fastest_batch_is_interior_when_steps_cost_a_fixed_time_plus_work() -> None:
    """step(B) = a + bB gives time ∝ (a + bB)(1 + B_c/B), least at B* = sqrt(a B_c / b)."""
    a, b, critical = 0.5, 0.001, 512
    batches = [2 ** k for k in range(4, 16)]
    best = min(batches, key=lambda x: time_score(a + b * x, x, critical))
    assert best == 512  # sqrt(0.5 * 512 / 0.001) = 506
    assert best not in (batches[0], batches[-1])
