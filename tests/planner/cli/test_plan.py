"""``meshplan plan`` as a user runs it: the plan file, --json, exit 3 with nothing written, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.plans.load import load_plan
from planner.plans.plan_checks import plan_problems

TINY = {
    "model_type": "llama", "hidden_size": 256, "intermediate_size": 768, "num_attention_heads": 4,
    "num_key_value_heads": 4, "num_hidden_layers": 4, "vocab_size": 8000, "max_position_embeddings": 4096,
    "tie_word_embeddings": False, "hidden_act": "silu", "rms_norm_eps": 1e-5,
}


@pytest.fixture
def tiny(tmp_path: Path) -> list[str]:
    """Flags planning a 4-block Llama-style model on 8 H100s (a search of well under a second)."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    return ["--model", str(config), "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "16", "--seq-len", "1024"]


def test_plan_writes_a_valid_plan_and_prints_a_summary(meshplan, tiny, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    proc = meshplan("plan", *tiny, "--target", "megatron", "--top-k", "2", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    plan = load_plan(out)
    assert plan_problems(plan) == []
    assert plan.request.target == "megatron" and len(plan.alternatives) <= 2
    assert plan.search.wall_time_s is None  # recorded only with --timing
    assert proc.stdout.startswith("plan (megatron): tp ") and "step " in proc.stdout and "search: " in proc.stdout
    assert f"wrote {out}" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "plan.json"]  # no temporary file left


def test_compile_plans_a_compiled_torchtitan_job_and_exports_it(meshplan, tiny, tmp_path: Path) -> None:
    """``--compile`` reaches the plan (every candidate compiles; async TP where TP is used) and the
    torchtitan export turns torch.compile on."""
    out, job = tmp_path / "plan.json", tmp_path / "job.py"
    proc = meshplan("plan", *tiny, "--target", "torchtitan", "--compile", "--tp", "2", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    plan = load_plan(out)
    assert plan.config.compile is True and plan.config.tp_comm_overlap and plan_problems(plan) == []
    assert meshplan("export", str(out), "--to", "torchtitan", "-o", str(job)).returncode == 0
    assert "config.compile = CompileConfig(enable=True, components=['model', 'loss'], enable_async_tensor_parallel=True)" in job.read_text()


def test_json_is_the_plan_file_byte_for_byte_and_deterministic(meshplan, tiny, tmp_path: Path) -> None:
    first = meshplan("plan", *tiny, "--json", "-o", str(tmp_path / "plan.json"))
    second = meshplan("plan", *tiny, "--json")
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout == (tmp_path / "plan.json").read_text() == second.stdout
    assert json.loads(first.stdout)["schema_version"] == "1.1"  # exactly one JSON document


def test_timing_records_the_search_wall_time(meshplan, tiny) -> None:
    proc = meshplan("plan", *tiny, "--json", "--timing", "--time-limit", "30")
    assert proc.returncode == 0, proc.stderr
    search = json.loads(proc.stdout)["search"]
    assert search["wall_time_s"] is not None and 0 <= search["wall_time_s"] < 30 and search["time_limit_s"] == 30


def test_no_plan_fits_exits_3_and_writes_nothing(meshplan, one_line_error, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    out.write_text("previous plan")
    proc = meshplan("plan", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "1", "--global-batch", "1",
                    "--seq-len", "2048", "-o", str(out))
    one_line_error(proc, 3, "nearest miss")
    assert "GiB" in proc.stderr and "would fit with" in proc.stderr
    assert out.read_text() == "previous plan"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]


@pytest.mark.parametrize(("flags", "fragment"), [
    (["--target", "jax"], "invalid choice: 'jax'"),
    (["--top-k", "-1"], "must be a non-negative integer"),
    (["--time-limit", "0"], "must be a positive number of seconds"),
    (["-o", "/nonexistent-dir/plan.json"], "directory /nonexistent-dir does not exist"),
])
def test_bad_input_exits_2_before_searching(meshplan, one_line_error, tiny, flags: list[str], fragment: str) -> None:
    one_line_error(meshplan("plan", *tiny, *flags), 2, fragment)


def test_missing_flags_are_named(meshplan, one_line_error) -> None:
    one_line_error(meshplan("plan", "--model", "gpt3-175b"), 2, "--cluster")


def test_unknown_model_is_bad_input(meshplan, one_line_error, tiny, tmp_path: Path) -> None:
    args = list(tiny)
    args[1] = "no-such-model"
    proc = meshplan("plan", *args, "-o", str(tmp_path / "plan.json"))
    one_line_error(proc, 2, "no-such-model")
    assert not (tmp_path / "plan.json").exists()


def test_constraints_shape_the_plan_and_are_echoed(meshplan, tiny, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    proc = meshplan("plan", *tiny, "--tp", "2", "--pp", "1..2", "--zero", "1..", "--recompute", "none", "--no-sp", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    plan = load_plan(out)
    c = plan.config
    assert c.tp == 2 and c.pp in (1, 2) and c.zero >= 1 and c.recompute == "none" and c.layer_recompute is None and not c.sp
    assert json.loads(out.read_text())["request"]["constraints"] == {
        "tp": [2, 2], "pp": [1, 2], "cp": None, "dp": None, "ep": None, "vpp": None, "zero": [1, None], "micro_batch": None,
        "sp": False, "recompute": "none", "schedule": None}
    assert plan_problems(plan) == []


@pytest.mark.parametrize(("flags", "code", "fragment"), [
    (["--pp", "4..2", "--tp", "3"], 2, "pp 4..2: the range is empty"),
    (["--tp", "8", "--pp", "2", "--dp", "4", "--cp", "2"], 2, "dp 4 x tp 8 x pp 2 x cp 2 = 128 != 8 GPUs"),
    (["--schedule", "zb-v"], 2, "invalid choice: 'zb-v'"),
    (["--tp", "2", "--micro-batch", "3"], 3, "no configuration satisfies the constraints (tp 2, micro-batch 3); nearest: tp 2 x "),
])
def test_bad_or_unsatisfiable_constraints_are_one_line(meshplan, one_line_error, tiny, tmp_path: Path, flags: list[str], code: int,
                                                       fragment: str) -> None:
    out = tmp_path / "plan.json"
    one_line_error(meshplan("plan", *tiny, *flags, "-o", str(out)), code, fragment)
    assert not out.exists()
