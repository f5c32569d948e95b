"""``meshplan estimate ... -o plan.json``: the plan file of exactly the estimated configuration."""

from __future__ import annotations

import json
from pathlib import Path

from planner.plans.load import load_plan
from planner.plans.plan_checks import plan_problems

JOB = ["--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "64", "--global-batch", "64", "--seq-len", "2048"]


def test_o_writes_a_valid_plan_of_the_estimated_configuration(meshplan, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    flags = ["--tp", "8", "--pp", "8", "--recompute", "selective", "--micro-batch", "2"]
    written = meshplan("estimate", *JOB, *flags, "--json", "-o", str(out))
    plain = meshplan("estimate", *JOB, *flags, "--json")
    assert written.returncode == plain.returncode == 0, written.stderr + plain.stderr
    assert written.stdout == plain.stdout  # -o changes nothing in the estimate
    assert f"wrote {out}" in written.stderr
    plan = load_plan(out)
    assert plan_problems(plan) == []
    assert (plan.config.tp, plan.config.pp, plan.config.micro_batch, plan.config.recompute) == (8, 8, 2, "selective")
    again = meshplan("estimate", "--plan", str(out), "--json")
    assert again.returncode == 0 and json.loads(again.stdout) == json.loads(plain.stdout)
    assert meshplan("validate", str(out)).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]


def test_a_configuration_that_does_not_fit_exits_3_and_writes_nothing(meshplan, one_line_error, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    out.write_text("previous plan")
    one_line_error(meshplan("estimate", *JOB, "--tp", "8", "-o", str(out)), 3, "a plan file holds only configurations that fit")
    assert out.read_text() == "previous plan" and [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_o_with_plan_is_refused(meshplan, one_line_error, tmp_path: Path) -> None:
    one_line_error(meshplan("estimate", "--plan", str(tmp_path / "p.json"), "-o", str(tmp_path / "q.json")), 2,
                   "-o writes the plan of a configuration given by flags")
