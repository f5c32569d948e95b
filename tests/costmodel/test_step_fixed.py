"""A cluster's ``efficiency.step_fixed_s`` is the step's fixed cost: in the estimate and in the search bound."""

from __future__ import annotations

import pytest

from costmodel.specs import ParallelConfig
from costmodel.step import STEP_FIXED_S, estimate_step
from costmodel.table import build_cost_table
from planner.intake.models import resolve_model
from profiles import load_cluster
from search.bounds import bound_s


def _with_fixed(cluster, seconds: float):
    return cluster.model_copy(update={"efficiency": cluster.efficiency.model_copy(update={"step_fixed_s": seconds})})


def test_presets_keep_the_fitted_default() -> None:
    assert load_cluster("dgx-h100").efficiency.step_fixed_s == STEP_FIXED_S == pytest.approx(0.03)


def test_step_fixed_moves_step_time_and_bound_by_the_difference() -> None:
    model = resolve_model("llama3.1-8b")
    cluster = load_cluster("dgx-h100")
    cfg = ParallelConfig(tp=2, pp=2, dp=2, global_batch=16, seq_len=2048, zero=1)
    base = build_cost_table(model, cluster)
    small = build_cost_table(model, _with_fixed(cluster, 0.01))
    diff = estimate_step(base, cfg).step_time_s - estimate_step(small, cfg).step_time_s
    assert diff == pytest.approx(STEP_FIXED_S - 0.01, rel=1e-9)
    assert bound_s(base, cfg) - bound_s(small, cfg) == pytest.approx(STEP_FIXED_S - 0.01, rel=1e-9)
    assert bound_s(small, cfg) <= estimate_step(small, cfg).step_time_s
