"""``meshplan serve-estimate``, ``serve-plan`` and ``export --to vllm|sglang|trtllm`` as a user runs them."""

from __future__ import annotations

import json

import pytest

from planner.cli import main

EST = ["serve-estimate", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "8", "--isl", "1000", "--osl", "1000",
       "--precision", "fp8"]
PLAN = ["serve-plan", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "8", "--isl", "1000", "--osl", "1000",
        "--precision", "fp8", "--ttft-ms", "1000", "--tpot-ms", "50"]


def test_serve_estimate_json_is_one_object(meshplan) -> None:
    proc = meshplan(*EST, "--tp", "4", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["fits"] and data["output_tokens_per_s_per_gpu"] > 0 and data["deployment"]["groups"][0]["tp"] == 4


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--tp", "3"], "tp 3 does not divide the 64 attention heads"),
    (["--prefill-workers", "4", "--prefill-tp", "2", "--decode-workers", "2", "--decode-tp", "4"], "more than the 8 given"),
    (["--tp", "4", "--engine", "tgi"], "invalid choice: 'tgi'"),
])
def test_serve_estimate_bad_input_exits_2_in_one_line(meshplan, one_line_error, extra, fragment) -> None:
    one_line_error(meshplan(*EST, *extra), 2, fragment)


def test_latency_target_must_be_positive(meshplan, one_line_error) -> None:
    one_line_error(meshplan(*PLAN[:-2], "--tpot-ms", "0"), 2, "tpot-ms must be a positive number, got 0.0")


def test_weights_that_do_not_fit_say_by_how_much(capsys) -> None:
    code = main(["serve-estimate", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "2", "--tp", "2",
                 "--isl", "100", "--osl", "100"])
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 3 and captured.out == "" and len(err) == 1
    assert "does not fit" in err[0] and "GiB more per GPU" in err[0]


def test_a_kv_cache_without_room_for_one_sequence_exits_3_with_the_shortfall(capsys) -> None:
    """The DeepSeek-R1 row that printed 0 tokens/s: a configuration that does not fit says so."""
    code = main(["serve-estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1", "--tp", "1",
                 "--isl", "5000000", "--osl", "1000", "--json"])
    captured = capsys.readouterr()
    assert code == 3 and captured.out == ""
    assert "cannot hold one sequence" in captured.err and "GiB more per GPU" in captured.err


def test_unreachable_targets_exit_3_with_the_nearest_miss(capsys) -> None:
    code = main([*PLAN[:-2], "--tpot-ms", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and "nearest miss:" in err[0]


def test_plan_export_and_report_from_the_command_line(tmp_path, capsys) -> None:
    plan, report = tmp_path / "serving.json", tmp_path / "serving.html"
    assert main([*PLAN, "-o", str(plan), "--report", str(report)]) == 0
    assert json.loads(plan.read_text())["kind"] == "serving" and "<svg" in report.read_text()
    for engine in ("vllm", "sglang", "trtllm"):
        assert main(["export", str(plan), "--to", engine, "-o", str(tmp_path / f"{engine}.sh")]) == 0
        assert (tmp_path / f"{engine}.sh").read_text().startswith("#!/usr/bin/env bash")
    capsys.readouterr()
    assert main(["validate", str(plan)]) == 0
    assert "valid (serving" in capsys.readouterr().out
    assert main(["export", str(plan), "--to", "megatron"]) == 2
    assert "is a serving plan" in capsys.readouterr().err


def test_help_shows_examples(capsys) -> None:
    for command in ("serve-estimate", "serve-plan"):
        assert main([command, "--help"]) == 0
        out = capsys.readouterr().out
        assert "examples:" in out and f"meshplan {command} --model" in out
