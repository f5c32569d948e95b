"""Runs come from run records (``planner.runtime.record.RunRecord``) and CSVs; every bad input is one
line naming the file and what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.calibration import load_observations
from planner.errors import InputError
from profiles import load_cluster
from tests.planner.calibration.conftest import measured_runs, run_record


def test_a_run_record_gives_its_configuration_and_median_step(tmp_path: Path, model_path: str, cluster_path: str) -> None:
    cluster = load_cluster(cluster_path)
    obs = measured_runs(model_path, cluster)[2]
    path = tmp_path / "run.json"
    path.write_text(run_record(obs, cluster_path).to_json(), encoding="utf-8")
    [loaded] = load_observations([str(path)], cluster)
    assert loaded.config == obs.config and loaded.step_time_s == obs.step_time_s
    assert loaded.peak_memory_gib == 0.5 and loaded.label == str(path) and loaded.model == obs.model


def test_csv_rows_build_configurations_like_estimate(tmp_path: Path, model_path: str, cluster_path: str) -> None:
    csv = tmp_path / "tiny" / "runs.csv"
    csv.write_text("model,gpus,global_batch,seq_len,tp,pp,micro_batch,sp,recompute,step_time_s,peak_memory_gib,label\n"
                   "config.json,4,8,128,2,1,1,true,selective,0.25,0.4,first\n"
                   "config.json,2,8,128,,2,,,,0.3,,\n", encoding="utf-8")
    first, second = load_observations([str(csv)], load_cluster(cluster_path))
    assert (first.config.tp, first.config.dp, first.config.sp, first.config.recompute, first.config.zero) == (2, 2, True, "selective", 1)
    assert first.label == "first" and first.peak_memory_gib == 0.4 and first.model_arg == model_path
    assert (second.config.pp, second.config.dp, second.peak_memory_gib, second.label) == (2, 1, None, f"{csv}:3")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model,gpus,seq_len\nx,1,2\n", r"missing columns global_batch, step_time_s \(needs model"),
        ("model,gpus,global_batch,seq_len,step_time,step_time_s\n", "unknown column step_time"),
        ("model,gpus,global_batch,seq_len,step_time_s\n", "no runs below the header"),
        ("model,gpus,global_batch,seq_len,step_time_s\nconfig.json,2,8,128,fast\n", r"runs.csv:2: column 'step_time_s' must be a number"),
        ("model,gpus,global_batch,seq_len,step_time_s\nconfig.json,2,8,128,-1\n", "step_time_s must be positive"),
        ("model,gpus,global_batch,seq_len,tp,step_time_s\nconfig.json,2,8,128,3,0.1\n", r"runs.csv:2: .*tp"),
    ],
)
def test_bad_csvs_are_named(tmp_path: Path, model_path: str, cluster_path: str, text: str, message: str) -> None:
    csv = tmp_path / "tiny" / "runs.csv"
    csv.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        load_observations([str(csv)], load_cluster(cluster_path))


def test_records_of_another_model_or_hardware_are_refused(tmp_path: Path, model_path: str, cluster_path: str) -> None:
    cluster = load_cluster(cluster_path)
    obs = measured_runs(model_path, cluster)[0]
    cases = [
        (run_record(obs, cluster_path, model_arg="gpt-1.7b").to_json(), "trained model 'gpt-1.7b' but its plan is for"),
        (run_record(obs, cluster_path, layers=9).to_json(), "has 7 layers here but the run trained 9: the record is for another model"),
        (run_record(obs, "dgx-h100").to_json(), "ran on GPU 'h100-sxm' .* not on the 'cpu-test'"),
        (json.dumps({"schema_version": "1.0"}), "is not a meshplan run record"),
        ("{not json", "is not a meshplan run record"),
    ]
    for i, (text, message) in enumerate(cases):
        path = tmp_path / f"r{i}.json"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=message):
            load_observations([str(path)], cluster)
    with pytest.raises(InputError, match="cannot read"):
        load_observations([str(tmp_path / "missing.json")], cluster)
