"""``meshplan export``: files, formats, and refusals as one line with exit code 2."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]


def meshplan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "cli.py"), *args], cwd=REPO, capture_output=True, text=True, timeout=120, check=False)


def test_megatron_launcher_file(plan_of, tmp_plan, tmp_path: Path) -> None:
    path = tmp_plan(plan_of(tp=2, pp=2, dp=4, sp=True, zero=1, global_batch=64, seq_len=4096))
    out = tmp_path / "launch.sh"
    proc = meshplan("export", path, "--to", "megatron", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and "wrote" in proc.stderr
    assert out.read_text().startswith("#!/usr/bin/env bash") and out.stat().st_mode & 0o100
    assert subprocess.run(["bash", "-n", str(out)], check=False).returncode == 0


def test_json_format_on_stdout_is_one_object(plan_of, tmp_plan) -> None:
    path = tmp_plan(plan_of(tp=2, pp=2, dp=4, sp=True, zero=1, global_batch=64, seq_len=4096))
    proc = meshplan("export", path, "--to", "megatron", "--format", "json")
    data = json.loads(proc.stdout)
    assert "--tensor-model-parallel-size" in data["argv"] and set(data["groups"]) == {"GPT_MODEL_ARGS", "TRAINING_ARGS", "MODEL_PARALLEL_ARGS"}


def test_torchtitan_registry_and_deepspeed_json(plan_of, tmp_plan) -> None:
    path = tmp_plan(plan_of(tp=1, pp=2, dp=8, zero=0, recompute="full", global_batch=64, seq_len=2048))
    registry = meshplan("export", path, "--to", "torchtitan")
    ast.parse(registry.stdout)  # a Python module (torchtitan 0.3.0's config registry)
    assert "    config.parallelism.pipeline_parallel_degree = 2\n" in registry.stdout
    ds = meshplan("export", path, "--to", "deepspeed")
    assert json.loads(ds.stdout)["train_batch_size"] == 64
    assert "PipelineModule(" in ds.stderr  # the code-side settings


def test_refusal_is_one_line_exit_2_naming_the_field(plan_of, tmp_plan) -> None:
    path = tmp_plan(plan_of(tp=1, pp=2, dp=8, zero=2, global_batch=64, seq_len=4096))
    proc = meshplan("export", path, "--to", "deepspeed")
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("meshplan: error: cannot export to deepspeed: mesh.zero:")


def test_bad_plan_and_bad_target_are_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({"schema_version": "0.9"}))
    proc = meshplan("export", str(bad), "--to", "megatron")
    assert proc.returncode == 2 and "schema_version '0.9'" in proc.stderr
    assert meshplan("export", str(bad), "--to", "nemo").returncode == 2
