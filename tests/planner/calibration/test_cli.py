"""``meshplan calibrate`` end to end: the calibrated file loads and ``estimate`` uses it; bad input
exits 2 with one line and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import planner
from planner.cli import main
from profiles import load_cluster
from tests.planner.calibration.conftest import measured_runs, run_record


def _csv(path: Path, runs) -> None:  # type: ignore[no-untyped-def]
    lines = ["model,gpus,global_batch,seq_len,tp,pp,micro_batch,zero,step_time_s"]
    for r in runs:
        c = r.config
        lines.append(f"{r.model_arg},{c.num_gpus},{c.global_batch},{c.seq_len},{c.tp},{c.pp},{c.micro_batch},{c.zero},{r.step_time_s!r}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_records_and_csv_calibrate_a_cluster_estimate_then_uses(tmp_path: Path, model_path: str, cluster_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = load_cluster(cluster_path)
    runs = measured_runs(model_path, cluster)
    records = []
    for i, obs in enumerate(runs[:3]):
        records.append(tmp_path / f"run{i}.json")
        records[-1].write_text(run_record(obs, cluster_path).to_json(), encoding="utf-8")
    _csv(tmp_path / "more.csv", runs[3:])
    out = tmp_path / "calibrated.json"
    code = main(["calibrate", *map(str, records), str(tmp_path / "more.csv"), "--cluster", cluster_path,
                 "--params", "compute,overhead,step_fixed", "-o", str(out), "--json"])
    assert code == 0, capsys.readouterr().err
    block = json.loads(capsys.readouterr().out)
    assert block["errors"]["before"]["mean_abs"] > 0.05 and block["errors"]["after"]["max_abs"] < 1e-3
    assert block["errors"]["leave_one_shape_out"]["runs"] == 6
    calibrated = load_cluster(out)
    assert calibrated.name == "calibrated" and calibrated.efficiency.step_fixed_s == pytest.approx(0.01, rel=1e-3)
    saved = json.loads(out.read_text())
    assert saved["calibration"]["factors"]["compute"]["value"] == pytest.approx(0.6, rel=1e-3)
    assert "meshplan calibrate: factor 'compute'" in saved["sources"]["efficiency.gemm_max"]
    c = runs[4].config
    est = planner.estimate(model=model_path, cluster=str(out), gpus=c.num_gpus, global_batch=c.global_batch, seq_len=c.seq_len,
                           tp=c.tp, pp=c.pp, micro_batch=c.micro_batch, zero=c.zero)
    assert est.step_time_s == pytest.approx(runs[4].step_time_s, rel=1e-3)


def test_tables_show_before_after_and_cross_validation(tmp_path: Path, model_path: str, cluster_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    _csv(tmp_path / "runs.csv", measured_runs(model_path, load_cluster(cluster_path)))
    assert main(["calibrate", str(tmp_path / "runs.csv"), "--cluster", cluster_path, "--params", "compute,step_fixed", "-o", str(tmp_path / "c.json")]) == 0
    text = capsys.readouterr().out
    for words in ("fitted factors", "before", "after (in-sample)", "leave-one-shape-out", "wrote"):
        assert words in text


def test_bad_input_exits_2_with_one_line_and_no_file(tmp_path: Path, model_path: str, cluster_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    runs = measured_runs(model_path, load_cluster(cluster_path))
    good = tmp_path / "runs.csv"
    _csv(good, runs)
    few = tmp_path / "few.csv"
    _csv(few, runs[:2])
    (tmp_path / "cols.csv").write_text("model,gpus,seq_len\nx,1,2\n", encoding="utf-8")
    (tmp_path / "broken.json").write_text('{"gpu": ', encoding="utf-8")
    other = tmp_path / "other.json"
    other.write_text(run_record(runs[0], cluster_path, model_arg="gpt-1.7b").to_json(), encoding="utf-8")
    cases = [
        ([str(tmp_path / "cols.csv"), "--cluster", cluster_path], "missing columns"),
        ([str(good), "--cluster", str(tmp_path / "broken.json")], "is not valid JSON"),
        ([str(few), "--cluster", cluster_path, "--params", "compute,overhead,step_fixed"], "under-determined fit: 2 runs"),
        ([str(other), "--cluster", cluster_path], "a record of another model"),
    ]
    out = tmp_path / "out.json"
    for argv, message in cases:
        assert main(["calibrate", *argv, "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and err.startswith("meshplan: error: ")
        assert not out.exists()
