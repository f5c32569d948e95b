"""``meshplan report``: formats from flags or extensions, files, errors as exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli._common import UsageError
from planner.cli.reporting import pick_format

REPO = Path(__file__).resolve().parents[4]


def meshplan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "cli.py"), *args], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def plan_file(small_plan, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(small_plan.to_json())
    return path


def test_pick_format() -> None:
    assert pick_format(None, None) == "md" and pick_format(None, "r.HTML") == "html" and pick_format("md", "r.html") == "md"
    assert pick_format(None, "-") == "md" and pick_format(None, "report") == "md"
    with pytest.raises(UsageError, match="cannot tell the format"):
        pick_format(None, "report.pdf")


def test_html_file_from_extension(plan_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = meshplan("report", str(plan_file), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and out.read_text().startswith("<!DOCTYPE html>")


def test_markdown_on_stdout(plan_file: Path) -> None:
    proc = meshplan("report", str(plan_file), "--no-reestimate")
    assert proc.returncode == 0 and proc.stdout.startswith("# meshplan report: llama3.1-8b")


def test_errors_are_one_line_exit_2(tmp_path: Path, plan_file: Path) -> None:
    missing = meshplan("report", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and missing.stderr.startswith("meshplan: error: cannot read plan") and len(missing.stderr.splitlines()) == 1
    bad = meshplan("report", str(plan_file), "-o", str(tmp_path / "r.pdf"))
    assert bad.returncode == 2 and "cannot tell the format" in bad.stderr


def test_plan_writes_the_report_beside_the_plan(tmp_path: Path) -> None:
    plan, report = tmp_path / "plan.json", tmp_path / "plan.html"
    proc = meshplan("plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "32",
                    "--seq-len", "2048", "--target", "megatron", "-o", str(plan), "--report", str(report))
    assert proc.returncode == 0, proc.stderr
    assert plan.exists() and report.read_text().startswith("<!DOCTYPE html>")
    assert "pretrain_gpt.py" in report.read_text()
