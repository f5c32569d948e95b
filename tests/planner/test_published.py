"""Golden test of fidelity (issue 2): the cost model against every comparable shared published run.

Each row's measured throughput becomes a step time with its source's own FLOP formula
(``planner.published``); the predicted step time must match within the acceptance bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.published import PUBLISHED_RUNS_CSV, hardware_flops_96, load_runs, model_flops_72

CSV = PUBLISHED_RUNS_CSV


@pytest.fixture(scope="module")
def errors() -> dict[str, float]:
    runs, _ = load_runs(CSV)
    return {r.label: estimate_step(build_cost_table(r.model, r.cluster), r.config).step_time_s / r.measured_step_s - 1 for r in runs}


def test_at_least_40_runs_compared(errors: dict[str, float]) -> None:
    assert len(errors) >= 40


def test_mean_absolute_error_at_most_10_percent(errors: dict[str, float]) -> None:
    assert sum(abs(e) for e in errors.values()) / len(errors) <= 0.10


def test_every_run_within_25_percent(errors: dict[str, float]) -> None:
    worst = max(errors, key=lambda k: abs(errors[k]))
    assert abs(errors[worst]) <= 0.25, (worst, errors[worst])


def test_source_flop_formulas_reproduce_narayanan_table_1() -> None:
    """GPT-3 175B-class row of Table 1: 96·B·s·l·h²(1 + s/6h + V/16lh) (eq. 3) and the 72 form."""
    row = dict(global_batch="1536", seq_len="2048", layers="96", hidden="12288", vocab="51200")
    assert hardware_flops_96(row) == pytest.approx(96 * 1536 * 2048 * 96 * 12288**2 * (1 + 2048 / (6 * 12288) + 51200 / (16 * 96 * 12288)))
    assert model_flops_72(row) / hardware_flops_96(row) == pytest.approx(0.75, rel=0.01)
