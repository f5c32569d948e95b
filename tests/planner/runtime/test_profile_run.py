"""``meshplan profile`` on CPU: one process in-process, and bad input (two gloo ranks under torchrun:
``tests/planner/calibration/test_loop.py``, which profiles that way as the first step of the loop).

The file it writes is a cluster the loader, ``estimate`` and ``plan`` accept; every number is cited;
the raw rows obey nccl-tests' bandwidth conventions.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from costmodel.specs import ClusterSpec, EfficiencySpec
from planner.cli import main
from planner.runtime.profile import default_options, profile_cluster
from profiles import cluster_sources, load_cluster

TINY = dict(hidden_sizes=(64, 128), tp_degrees=(1, 2), tokens=128, attention_seq_lens=(64,), attention_head_dims=(32,),
            attention_tokens=128, memory_bytes=(1 << 20, 4 << 20), kernel_calls=50)


def _cited(path: Path) -> None:
    """Every number of the cluster has a citation."""
    expected = {f"gpu.{f}" for f in ("peak_bf16_tflops", "hbm_gib", "hbm_bandwidth_gbps")}
    expected |= {f for f, info in ClusterSpec.model_fields.items() if f not in ("name", "gpu", "efficiency", "source") and info.is_required()}
    expected |= {f"efficiency.{f}" for f in EfficiencySpec.model_fields}
    assert expected <= set(cluster_sources(path))


def test_one_process_measures_compute_and_writes_a_loadable_cluster(tmp_path: Path) -> None:
    options = dataclasses.replace(default_options("cpu", quick=True), **TINY)
    result = profile_cluster(options, name="one-cpu")
    path = tmp_path / "one.json"
    path.write_text(json.dumps(result.entry), encoding="utf-8")
    cluster = load_cluster(path)
    assert cluster == result.cluster and cluster.name == "one-cpu" and cluster.gpus_per_node == 1
    assert 0 < cluster.efficiency.gemm_max <= 1 and cluster.gpu.name.startswith("cpu-")
    raw = result.entry["measurements"]
    dtypes = {p["dtype"] for p in raw["gemm"]}  # bf16 too where the CPU has fast bf16 (AMX / AVX-512 BF16)
    assert "float32" in dtypes <= {"float32", "bfloat16"}
    assert len(raw["gemm"]) == 2 * 2 * 4 * len(dtypes) and raw["collectives"] == []
    assert {p["backend"] for p in raw["attention"]} >= {"default", "math"}
    # the fitted line goes through the measured GEMMs: the median measured / model time is near 1
    ratios = sorted(p["time_s"] * cluster.gpu.peak_bf16_tflops * 1e12 * cluster.efficiency.gemm_max
                    / (2 * p["m"] * p["n"] * p["k"] + cluster.efficiency.gemm_half_gflop * 1e9) for p in raw["gemm"])
    assert 0.67 < ratios[len(ratios) // 2] < 1.5
    assert "one process" in cluster_sources(path)["intra_node_bandwidth_gbps"]
    _cited(path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--device", "cuda"], "no CUDA device"),
        (["--device", "cpu", "--sizes", "12XB"], "--sizes: cannot read size '12XB'"),
        (["--device", "cpu", "--hidden", "0"], "--hidden"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    out = tmp_path / "c.json"
    assert main(["profile", *argv, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not out.exists()


def test_output_into_a_missing_directory_is_refused_before_measuring(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--device", "cpu", "-o", str(tmp_path / "nope" / "c.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
