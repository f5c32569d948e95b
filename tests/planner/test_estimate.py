"""planner.estimate: the contract's keys, derived DP, defaults stated as assumptions, non-fitting
configurations, and one-line InputErrors."""

from __future__ import annotations

import pytest

import planner
from planner.errors import InputError

GPT3 = dict(model="gpt3-175b", cluster="dgx-a100", gpus=1024, global_batch=1536, seq_len=2048)
KEYS = {"step_time_s", "tokens_per_s", "mfu", "model_tflops_per_gpu", "peak_memory_gib", "fits", "time_breakdown_s", "memory_breakdown_gib"}


def test_contract_keys_and_consistency() -> None:
    out = planner.estimate(**GPT3, tp=8, pp=16).model_dump()
    assert KEYS <= out.keys()
    assert set(out["time_breakdown_s"]) == {"compute", "exposed_comm", "pipeline_bubble", "recompute", "optimizer"}
    assert set(out["memory_breakdown_gib"]) == {"params", "grads", "optimizer_states", "activations", "buffers"}
    assert sum(out["time_breakdown_s"].values()) == pytest.approx(out["step_time_s"], rel=1e-9)
    assert sum(out["memory_breakdown_gib"].values()) == pytest.approx(out["peak_memory_gib"], rel=1e-9)
    assert out["config"]["dp"] == 8
    assert out["tokens_per_s"] == pytest.approx(1536 * 2048 / out["step_time_s"])
    assert 0.2 < out["mfu"] < 0.8
    assert any("dp = 1024" in a for a in out["assumptions"])


def test_more_recompute_trades_time_for_memory() -> None:
    none = planner.estimate(**GPT3, tp=8, pp=16, recompute="none")
    full = planner.estimate(**GPT3, tp=8, pp=16, recompute="full")
    assert full.step_time_s > none.step_time_s
    assert full.peak_memory_gib < none.peak_memory_gib
    assert full.time_breakdown_s.recompute > 0 == none.time_breakdown_s.recompute


def test_configuration_that_does_not_fit_still_estimates() -> None:
    out = planner.estimate(model="gpt3-175b", cluster="dgx-a100", gpus=8, global_batch=8, seq_len=2048, tp=8)
    assert not out.fits and out.over_by_gib > 0
    assert out.peak_memory_gib == pytest.approx(out.memory_capacity_gib + out.over_by_gib)


@pytest.mark.parametrize(
    "changes, needle",
    [
        (dict(tp=8, pp=16, gpus=1000), "does not divide"),
        (dict(tp=7), "tp"),
        (dict(model="gpt3-175bb"), "did you mean"),
        (dict(cluster="dgx-a1000"), "dgx-a100"),
        (dict(global_batch=0), "global"),
    ],
)
def test_bad_input_is_one_line(changes: dict, needle: str) -> None:
    with pytest.raises(InputError) as err:
        planner.estimate(**{**GPT3, "tp": 8, "pp": 16, **changes})
    assert needle in str(err.value) and "\n" not in str(err.value)
