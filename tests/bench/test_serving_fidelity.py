"""bench/serving_fidelity.py: every shared run predicts a positive rate, and the check can fail."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import serving_fidelity as bench  # noqa: E402

from costmodel.serving.specs import ServingEfficiency  # noqa: E402


def test_every_shared_row_predicts_a_positive_rate() -> None:
    runs, _ = bench.serving_runs()
    ctxs = bench._contexts(runs)
    assert bench.non_positive(runs, ctxs, ServingEfficiency()) == []
    assert bench.main(["serving_fidelity.py"]) == 0


def test_the_check_fails_on_a_row_that_does_not_fit() -> None:
    """A row whose weights cannot fit (Llama 3.1 405B on one H100) is reported, not passed."""
    runs, _ = bench.serving_runs()
    row = next(r for r in runs if r.model == "llama3.1-405b")
    bad = row.__class__(**{**row.__dict__, "cluster": "dgx-h100", "gpus": 1, "tp": 1})
    ctxs = bench._contexts([bad])
    found = bench.non_positive([bad], ctxs, ServingEfficiency())
    assert len(found) == 1 and "llama3.1-405b" in found[0]


def test_the_report_breaks_errors_down_by_engine_and_tp() -> None:
    runs, _ = bench.serving_runs()
    lines = bench.report(runs[:12], bench._contexts(runs[:12]), ServingEfficiency(), per_row=False)
    assert any(line.startswith("by engine") for line in lines) and any(line.startswith("by tp") for line in lines)
