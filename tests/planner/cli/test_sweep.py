"""``meshplan sweep`` as a user runs it: table, JSON and report files; bad grids one line each (exit 2);
a deadline nothing meets exits 3 naming the closest point and writes nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from planner.plans.load import load_plan
from tests.planner.capacity.conftest import TINY, write_config


@pytest.fixture
def tiny(tmp_path: Path) -> list[str]:
    return ["--model", write_config(tmp_path, TINY), "--cluster", "dgx-h100", "--seq-len", "1024"]


def test_sweep_prints_a_table_and_writes_json_report_and_plans(meshplan, tiny, tmp_path: Path) -> None:
    out, report = tmp_path / "sweep.json", tmp_path / "sweep.html"
    proc = meshplan("sweep", *tiny, "--gpus", "8..16", "--global-batch", "16", "--tokens", "1B", "--price-per-gpu-hour", "2",
                    "--deadline", "30d", "-o", str(out), "--report", str(report))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:4] == ["cluster", "GPUs", "seq", "batch"] and [x.split()[1] for x in lines[1:3]] == ["8", "16"]
    assert lines[3].startswith("deadline: dgx-h100: 8 GPUs")
    data = json.loads(out.read_text())
    assert [p["gpus"] for p in data["points"]] == [8, 16] and data["deadline"][0]["gpus"] == 8
    for point in data["points"]:
        plan = load_plan(tmp_path / point["plan_file"])
        assert plan.estimate.step_time_s == point["step_time_s"]
        assert (tmp_path / point["report_file"]).read_text().startswith("<!DOCTYPE html>")
    assert set(re.findall(r'<a href="([^"#]+)"', report.read_text())) == {p["report_file"] for p in data["points"]}
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize(("flags", "fragment"), [
    (["--gpus", "4096..64", "--global-batch", "16"], "--gpus 4096..64 is an empty range"),
    (["--gpus", "12", "--global-batch", "16"], "--gpus 12 does not fill whole dgx-h100 nodes of 8 GPUs"),
    (["--gpus", "8", "--global-batch", "auto"], "needs --critical-batch"),
    (["--gpus", "8", "--global-batch", "16", "--deadline", "30d"], "--deadline needs --tokens"),
    (["--gpus", "8", "--global-batch", "16", "-o", "sweep.txt"], "must end in .json or .csv"),
    (["--gpus", "8", "--global-batch", "16", "--gpu-tdp-w", "-5"], "--gpu-tdp-w: must be a positive number of watts"),
    (["--gpus", "8", "--global-batch", "16", "--price-per-gpu-hour", "1,2"], "2 prices for 1 clusters"),
    (["--gpus", "8", "--global-batch", "16", "--tp", "3"], "tp 3 does not divide"),
    (["--gpus", "8", "--global-batch", "16", "--cluster", "dgx-a100", "--precision", "fp8"], "precision fp8: GPU a100-80gb has no FP8 tensor cores"),
])
def test_bad_grids_are_one_line(meshplan, one_line_error, tiny, flags: list[str], fragment: str) -> None:
    one_line_error(meshplan("sweep", *tiny, *flags), 2, fragment)


def test_ray_without_ray_installed_is_one_line(meshplan, one_line_error, tiny, tmp_path: Path) -> None:
    """A ``ray`` package that fails to import stands for an environment without the extra."""
    shadow = tmp_path / "shadow" / "ray"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    proc = meshplan("sweep", *tiny, "--gpus", "8", "--global-batch", "16", "--ray", "auto", env={"PYTHONPATH": str(shadow.parent)})
    one_line_error(proc, 2, "--ray needs Ray, which is not installed: pip install 'meshplan[ray]'")


def test_a_deadline_nothing_meets_exits_3_with_the_closest_point(meshplan, one_line_error, tiny, tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    out.write_text("previous sweep")
    proc = meshplan("sweep", *tiny, "--gpus", "8,16", "--global-batch", "16", "--tokens", "1T", "--deadline", "1h", "-o", str(out))
    one_line_error(proc, 3, "no point trains within the deadline of 1.0 hours; closest: dgx-h100, ")
    assert re.search(r"closest: dgx-h100, (8|16) GPUs, batch 16, sequence 1024: [0-9.,]+ days \([0-9.,]+ days over\)", proc.stderr)
    assert out.read_text() == "previous sweep"


def _in_the_way(tmp_path: Path, where: str) -> tuple[Path, str]:
    """A ``--report`` whose plans folder cannot be written: the folder's name is a file, or a plan's
    file name is a directory. Returns the report path and what the error line must say."""
    report, folder = tmp_path / "r.html", tmp_path / "r_plans"
    if where == "folder":
        folder.write_text("mine")
        return report, f"--report {report}: cannot write its plans folder: {folder} is in the way"
    (folder / "000-dgx-h100-8gpu-b16-s1024.json").mkdir(parents=True)
    return report, f"--report {report}: cannot write its plans folder {folder}: 000-dgx-h100-8gpu-b16-s1024.json there is a directory"


@pytest.mark.parametrize("where", ["folder", "plan file"])
def test_an_unwritable_plans_folder_is_the_only_line_and_names_the_report(meshplan, one_line_error, tiny, tmp_path: Path, where: str) -> None:
    """Issue 35: the error comes alone (no 'swept' line before it) and names the file the user gave."""
    report, fragment = _in_the_way(tmp_path, where)
    proc = meshplan("sweep", *tiny, "--gpus", "8", "--global-batch", "16", "--report", str(report))
    one_line_error(proc, 2, fragment)
    assert "give a file name such as" not in proc.stderr and not report.exists()
