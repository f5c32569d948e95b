"""``bench/gpu_truth.py``'s CPU rehearsal: one tiny row end to end (prediction with the preset and the
profiled cluster file, ``meshplan run``, the Hugging Face bf16 reference step), the JSON it writes and
the table it prints. The full rehearsal is ``python bench/gpu_truth.py --device cpu --tiny``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_truth  # noqa: E402


def test_the_shared_configurations_are_the_rows_and_tiny_keeps_their_names(tmp_path: Path) -> None:
    full = gpu_truth.configs(False, tmp_path)
    truth = json.loads(gpu_truth.TRUTH.read_text())
    assert {r["config"] for r in truth["rows"]} == {c.name for c in full if c.shared}
    assert any(c.compile for c in full) and all(Path(c.model).exists() for c in full if c.model.endswith(".json"))
    tiny = gpu_truth.configs(True, tmp_path)
    assert {c.name for c in tiny} <= {c.name for c in full} and all(c.seq <= 128 for c in tiny)


def test_a_tiny_row_rehearses_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "truth.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_truth.py"), "--device", "cpu", "--tiny",
                           "--only", "l1b-s2k-mb4-none", "--steps", "2", "--warmup", "1", "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["run"]["outcome"] == "ok" and row["reference"]["outcome"] == "ok"
    assert row["run"]["master_dtype"] == "float32" and row["run"]["stderr_foreign_lines"] == 0
    assert row["predicted_preset"]["step_s"] > 0 and row["predicted_profiled"]["step_s"] > 0
    assert row["run_over_reference"] > 0 and row["predicted_over_run"] > 0
    assert "run/ref" in done.stdout and "l1b-s2k-mb4-none" in done.stdout
