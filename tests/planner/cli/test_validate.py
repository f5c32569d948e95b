"""``meshplan validate plan.json``: exit 0 and a valid summary, or exit 2 with every problem on one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TINY = {
    "model_type": "llama", "hidden_size": 256, "intermediate_size": 768, "num_attention_heads": 4,
    "num_key_value_heads": 4, "num_hidden_layers": 4, "vocab_size": 8000, "max_position_embeddings": 4096,
    "tie_word_embeddings": False, "hidden_act": "silu", "rms_norm_eps": 1e-5,
}


@pytest.fixture
def plan_file(meshplan, tmp_path: Path) -> Path:
    """A plan written by ``meshplan plan`` for a small model on 8 GPUs."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    out = tmp_path / "plan.json"
    proc = meshplan("plan", "--model", str(config), "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "16",
                    "--seq-len", "1024", "--target", "deepspeed", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def test_a_written_plan_is_valid(meshplan, plan_file: Path) -> None:
    proc = meshplan("validate", str(plan_file))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{plan_file}: valid (deepspeed): tp ")
    assert proc.stderr == ""


def test_every_problem_on_one_line(meshplan, one_line_error, plan_file: Path) -> None:
    data = json.loads(plan_file.read_text())
    data["mesh"]["dp"] += 1
    data["stages"][-1]["layers"] = data["stages"][-1]["layers"][:-1]
    data["estimate"]["step_time_s"] *= 2
    plan_file.write_text(json.dumps(data))
    proc = meshplan("validate", str(plan_file))
    one_line_error(proc, 2, f"plan {plan_file} is invalid: mesh.dp is")
    assert "; stage " in proc.stderr and "the stages cover layers" in proc.stderr and "stored estimate step_time_s" in proc.stderr


def test_target_rule_broken_by_hand(meshplan, one_line_error, plan_file: Path) -> None:
    data = json.loads(plan_file.read_text())
    data["config"]["cp"], data["config"]["dp"] = 2, data["config"]["dp"] // 2
    data["mesh"]["cp"], data["mesh"]["dp"] = 2, data["mesh"]["dp"] // 2
    plan_file.write_text(json.dumps(data))
    one_line_error(meshplan("validate", str(plan_file)), 2, "deepspeed has no context parallelism")


@pytest.mark.parametrize(("text", "fragment"), [
    ("{not json", "is not valid JSON"),
    ('{"schema_version": "0.1"}', "schema_version '0.1'"),
    ('{"schema_version": "1.1"}', "is malformed"),
])
def test_unreadable_plans_are_bad_input(meshplan, one_line_error, tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "plan.json"
    path.write_text(text)
    one_line_error(meshplan("validate", str(path)), 2, fragment)


def test_missing_plan_is_bad_input(meshplan, one_line_error, tmp_path: Path) -> None:
    one_line_error(meshplan("validate", str(tmp_path / "nowhere.json")), 2, "nowhere.json")
