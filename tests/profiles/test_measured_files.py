"""Cluster files written by ``meshplan profile`` / ``meshplan calibrate`` carry their raw measurements and
fit beside the numbers; the loader accepts them and rejects them when they are not JSON objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiles import ProfileError, cluster_sources, load_cluster

_ENTRY = {
    "gpu": {"name": "cpu-test", "peak_bf16_tflops": 0.1, "hbm_gib": 4.0, "hbm_bandwidth_gbps": 10.0},
    "gpus_per_node": 2,
    "intra_node_bandwidth_gbps": 2.0,
    "network_bandwidth_gbps": 2.0,
    "intra_node_latency_us": 20.0,
    "network_latency_us": 20.0,
    "efficiency": {"gemm_max": 0.5, "gemm_half_gflop": 0.01, "attention": 0.3, "memory": 0.8, "intra_node": 0.9, "network": 0.9, "step_fixed_s": 0.002},
}


def _write(tmp_path: Path, entry: dict) -> Path:
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(entry), encoding="utf-8")
    return path


def test_measurements_and_calibration_are_kept_beside_the_numbers(tmp_path: Path) -> None:
    entry = {**_ENTRY, "measurements": {"gemm": [{"m": 64, "time_s": 1e-4}]}, "calibration": {"params": {}}}
    cluster = load_cluster(_write(tmp_path, entry))
    assert cluster.efficiency.step_fixed_s == 0.002
    assert cluster.gpu.name == "cpu-test"
    sources = cluster_sources(_write(tmp_path, entry))
    assert sources["efficiency.overlap_slowdown"].startswith("EfficiencySpec default 0.1")


@pytest.mark.parametrize("key", ["measurements", "calibration"])
def test_a_measurement_block_that_is_not_an_object_is_named(tmp_path: Path, key: str) -> None:
    with pytest.raises(ProfileError, match=f"field '{key}' must be a JSON object"):
        load_cluster(_write(tmp_path, {**_ENTRY, key: [1, 2]}))
