"""Golden test of fidelity (issue 2): the cost model against every comparable shared published run.

Each row's measured throughput becomes a step time with its source's own FLOP formula
(``planner.reference.published``); the predicted step time must match within the acceptance bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.reference.published import PUBLISHED_RUNS_CSV, hardware_flops_96, load_runs, model_flops_72

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


def test_every_row_with_a_configuration_is_compared_with_its_engine_and_precision() -> None:
    runs, skipped = load_runs(CSV)
    assert len(runs) == 67 and len(skipped) == 2  # the two strong-scaling rows print no configuration
    by = {(r.source, r.config.engine, r.config.precision) for r in runs}
    assert {("torchtitan", "torchtitan", "fp8"), ("torchtitan", "torchtitan", "bf16"), ("nemo", "megatron", "fp8")} <= by
    titan = [r for r in runs if r.source == "torchtitan"]
    assert sum(bool(r.config.compile) for r in titan) == 4 and all(r.measured_peak_memory_gib for r in titan)


def test_fidelity_mean_and_per_source_bias(errors: dict[str, float]) -> None:
    """bench/fidelity.py's figures: overall mean |error| <= 6 %, no source biased beyond 8 %."""
    assert sum(abs(e) for e in errors.values()) / len(errors) <= 0.06
    runs, _ = load_runs(CSV)
    sources: dict[str, list[float]] = {}
    for r in runs:
        sources.setdefault(r.source, []).append(errors[r.label])
    for source, errs in sources.items():
        assert abs(sum(errs) / len(errs)) <= 0.08, (source, sum(errs) / len(errs))


def test_torchtitan_peak_memory_never_3_percent_under() -> None:
    """torchtitan prints the caching allocator's reserved peak (components/metrics.py
    ``reserved_bytes.all.peak``): the per-GPU peak less the runtime overhead outside the allocator
    (bench/fidelity.py) is never under it by more than 3 % (issue 11, deliverable 5) nor over by 6 %,
    and eager runs need more than compiled ones at the same scale."""
    runs, _ = load_runs(CSV)
    reserved = {}
    for r in runs:
        if r.measured_peak_memory_gib is not None:
            predicted = estimate_step(build_cost_table(r.model, r.cluster), r.config).peak_memory_gib - r.cluster.runtime_overhead_gib
            assert -0.03 <= predicted / r.measured_peak_memory_gib - 1 <= 0.06, r.label
            reserved[(r.config.dp, bool(r.config.compile), r.config.precision)] = predicted
    for dp in (8, 128):
        assert reserved[(dp, False, "bf16")] - reserved[(dp, True, "bf16")] > 3.5  # measured 5.4 and 5.0 GiB


def test_engine_rows_within_their_published_figures(errors: dict[str, float]) -> None:
    """torchtitan's FSDP2 rows (eager, compile, Float8) and NeMo's FP8 rows, each with its engine and
    precision: within 8 % and 10 % of the measured step time; the whole file within 5 % on average."""
    runs, _ = load_runs(CSV)
    for r in runs:
        bound = {"torchtitan": 0.08, "nemo": 0.10}.get(r.source)
        if bound is not None:
            assert abs(errors[r.label]) <= bound, (r.label, errors[r.label])
    assert sum(abs(e) for e in errors.values()) / len(errors) <= 0.05
