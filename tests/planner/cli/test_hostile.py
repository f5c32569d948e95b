"""Issue 13 regressions that need a real process: undecodable bytes in a path, a directory nobody
can write, --trace on a preset; each is exit 2 with one line and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

ESTIMATE = ["--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "8", "--seq-len", "128"]


def _bytes_run(*args: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable.encode(), os.fsencode(REPO / "cli.py"), *args], cwd=REPO, capture_output=True, timeout=120, check=False)


def test_a_path_with_undecodable_bytes_is_one_escaped_line() -> None:
    proc = _bytes_run(b"validate", b"/tmp/plan-\xff\xfe.json")
    assert proc.returncode == 2 and proc.stdout == b""
    line = proc.stderr.decode("utf-8")  # printable as UTF-8: the bytes come back as escapes
    assert line.count("\n") == 1 and line.startswith("meshplan: error: ") and "\\udcff" in line


def test_writing_where_nothing_can_be_written_says_cannot_write(meshplan, one_line_error, tmp_path) -> None:
    plan_json = tmp_path / "plan.json"
    proc = meshplan("estimate", "--model", "llama3.1-8b", *ESTIMATE, "--json")
    assert proc.returncode == 0
    one_line_error(meshplan("report", str(plan_json), "-o", "/proc/meshplan-report.md"), 2, "")
    proc = meshplan("export", "/nonexistent/plan.json", "--to", "megatron", "-o", "/proc/self/meshplan.sh")
    assert proc.returncode == 2 and "cannot write" in proc.stderr and "cannot read" not in proc.stderr


def test_trace_is_never_silently_ignored(meshplan, one_line_error) -> None:
    one_line_error(meshplan("estimate", "--model", "llama3.1-8b", "--trace", *ESTIMATE), 2, "--trace applies to a Hugging Face config.json")
