"""The fit recovers factors runs were generated with, resists an outlier, cross-validates by shape,
and refuses what the runs cannot determine."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from planner.calibration import Observation, apply, calibrate, error_stats, predict
from planner.estimation.estimate import build_config
from planner.intake.arguments import resolve_model_arg
from planner.calibration.fit import _check_determined
from planner.errors import InputError
from profiles import load_cluster
from tests.planner.calibration.conftest import TINY_LLAMA, TRUTH, measured_runs


def test_the_fit_recovers_the_factors_the_runs_were_measured_with(model_path: str, cluster_path: str) -> None:
    cluster = load_cluster(cluster_path)
    runs = measured_runs(model_path, cluster)
    result = calibrate(runs, cluster, ["compute", "overhead", "step_fixed"])
    for name, value in TRUTH.items():
        assert result.values[name] == pytest.approx(value, rel=1e-3)
    measured = [r.step_time_s for r in runs]
    before = error_stats([r.before_s for r in result.runs], measured)
    after = error_stats([r.after_s for r in result.runs], measured)
    held = error_stats([r.held_out_s for r in result.runs], measured)
    assert before is not None and before[0] > 0.05  # the uncalibrated cluster is off
    assert after is not None and after[1] < 1e-3
    assert held is not None and held[2] == len(runs) and held[1] < 1e-3
    assert result.cluster.efficiency.kernel_overhead_us == pytest.approx(20.0, rel=1e-3)
    assert result.cluster.efficiency.gemm_max == pytest.approx(0.8 * 0.6, rel=1e-3)


def test_one_disturbed_run_barely_moves_the_robust_fit(model_path: str, cluster_path: str) -> None:
    cluster = load_cluster(cluster_path)
    runs = measured_runs(model_path, cluster)
    runs[1] = dataclasses.replace(runs[1], step_time_s=runs[1].step_time_s * 1.6)
    result = calibrate(runs, cluster, ["compute", "overhead", "step_fixed"])
    clean = [abs(r.after_s / r.obs.step_time_s - 1) for i, r in enumerate(result.runs) if i != 1]
    assert max(clean) < 0.06
    held = result.runs[1].held_out_s  # predicted without the disturbed run: the truth, not the outlier
    assert held is not None and held / (runs[1].step_time_s / 1.6) == pytest.approx(1.0, abs=0.02)


def test_default_factors_keep_what_the_runs_do_not_exercise(tmp_path: Path, model_path: str, cluster_path: str) -> None:
    cluster = load_cluster(cluster_path)
    wide = tmp_path / "wide" / "config.json"
    wide.parent.mkdir()
    wide.write_text(json.dumps({**TINY_LLAMA, "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 2}), encoding="utf-8")
    runs = []
    for arg in (model_path, str(wide)):
        model = resolve_model_arg(arg)
        for batch, seq, mb in ((4, 128, 1), (8, 64, 2), (2, 512, 1), (16, 256, 4)):
            cfg, _ = build_config(model, cluster, 1, global_batch=batch, seq_len=seq, micro_batch=mb, zero=0)
            step = predict(Observation("probe", arg, model, cfg, 1.0), apply(cluster, {"compute": 0.5, "memory": 0.7, "step_fixed": 0.02}))[0]
            runs.append(Observation(f"{arg}:{batch}", arg, model, cfg, step))
    result = calibrate(runs, cluster, None)
    assert result.kept == {"comm": "not exercised by these runs"}
    assert set(result.values) == {"compute", "attention", "memory", "overhead", "step_fixed"}
    assert max(abs(r.after_s / r.obs.step_time_s - 1) for r in result.runs) < 0.01


def test_refusals_name_the_reason(model_path: str, cluster_path: str) -> None:
    cluster = load_cluster(cluster_path)
    runs = measured_runs(model_path, cluster)
    with pytest.raises(InputError, match=r"under-determined fit: 2 runs of 2 distinct shapes for 3 factors"):
        calibrate(runs[:2], cluster, ["compute", "overhead", "step_fixed"])
    single = [r for r in runs if r.config.num_gpus == 1] * 3
    with pytest.raises(InputError, match="the runs do not exercise comm"):
        calibrate(single, cluster, ["compute", "comm"])
    with pytest.raises(InputError, match="unknown factor speed"):
        calibrate(runs, cluster, ["speed"])
    with pytest.raises(InputError, match="no runs"):
        calibrate([], cluster)


def test_factors_that_move_every_run_alike_are_refused(model_path: str, cluster_path: str) -> None:
    runs = measured_runs(model_path, load_cluster(cluster_path))
    column = np.array([0.5, 0.6, 0.7, 0.2, 0.4, 0.3])
    sens = np.stack([column, 2 * column, np.ones(6)], axis=1)
    with pytest.raises(InputError, match="cannot tell (compute from memory|memory from compute)"):
        _check_determined(runs, ["compute", "memory", "step_fixed"], sens)
    _check_determined(runs, ["compute", "memory", "step_fixed"], np.stack([column, column**2, np.ones(6)], axis=1))


def test_the_latency_factor_scales_the_cluster_link_latencies(model_path: str, cluster_path: str) -> None:
    """``latency`` multiplies the cluster's per-hop latencies (not an efficiency capped at 1): runs
    measured with every collective waiting 200x longer per hop are recovered."""
    cluster = load_cluster(cluster_path)
    truth = {"compute": 0.6, "latency": 200.0, "step_fixed": 0.01}
    runs = measured_runs(model_path, cluster, truth)
    result = calibrate(runs, cluster, list(truth))
    assert result.values["latency"] == pytest.approx(200.0, rel=1e-2)
    assert result.cluster.intra_node_latency_us == pytest.approx(30.0 * 200, rel=1e-2)
    assert result.cluster.network_latency_us == pytest.approx(30.0 * 200, rel=1e-2)
    assert result.cluster.efficiency == apply(cluster, {k: result.values[k] for k in ("compute", "step_fixed")}).efficiency
