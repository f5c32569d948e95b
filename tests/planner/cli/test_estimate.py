"""``meshplan estimate`` run as a separate process: the JSON contract, the summary, every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

_GPT3 = ["--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "1024", "--global-batch", "1536",
         "--seq-len", "2048", "--tp", "8", "--pp", "16"]  # fmt: skip
"""The README's example: GPT-3 175B on 1024 A100s (Narayanan et al. SC21, Table 1 shape)."""
_SMALL = ["estimate", "--model", "gpt-1.7b", "--cluster", "dgx-a100", "--global-batch", "64"]
"""gpt-1.7b: 24 layers, 24 heads (Narayanan et al. SC21, Table 1); the rest is set per case."""

_CONTRACT_KEYS = {
    "step_time_s", "tokens_per_s", "mfu", "model_tflops_per_gpu", "peak_memory_gib", "memory_capacity_gib",
    "fits", "over_by_gib", "time_breakdown_s", "link_time_s", "memory_breakdown_gib", "config", "assumptions",
}  # fmt: skip


def test_json_prints_one_object_with_the_contract_keys(meshplan) -> None:
    proc = meshplan("estimate", *_GPT3, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # exactly one JSON document: trailing text would fail here
    assert _CONTRACT_KEYS <= set(result)
    assert set(result["time_breakdown_s"]) >= {"compute", "exposed_comm", "pipeline_bubble", "recompute", "optimizer"}
    assert set(result["link_time_s"]) >= {"tp", "cp", "ep", "pp", "dp"}
    assert set(result["memory_breakdown_gib"]) >= {"params", "grads", "optimizer_states", "activations", "buffers"}
    assert result["step_time_s"] > 0 and 0 < result["mfu"] < 1
    assert result["tokens_per_s"] == pytest.approx(1536 * 2048 / result["step_time_s"], rel=1e-6)


def test_summary_tables_without_json(meshplan) -> None:
    proc = meshplan("estimate", *_GPT3)
    assert proc.returncode == 0, proc.stderr
    for text in ("step time", "tokens/s", "MFU", "TFLOP/s per GPU", "peak memory per GPU", "pipeline bubble",
                 "total link time", "exposed (not hidden by compute)", "optimizer states"):  # fmt: skip
        assert text in proc.stdout, text


def test_config_that_does_not_fit_is_still_an_estimate(meshplan) -> None:
    args = ["--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "8", "--global-batch", "8",
            "--seq-len", "2048", "--tp", "8", "--zero", "0"]  # fmt: skip
    proc = meshplan("estimate", *args)
    assert proc.returncode == 0, proc.stderr
    assert "does not fit: over by" in proc.stdout
    result = json.loads(meshplan("estimate", *args, "--json").stdout)
    assert result["fits"] is False and result["over_by_gib"] > 0


def _config_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.json"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--gpus", "48", "--seq-len", "2048", "--tp", "8", "--pp", "4", "--cp", "2"],
         "tp 8 x pp 4 x cp 2 = 64 does not divide 48 GPUs"),
        (["--gpus", "16", "--seq-len", "2048", "--tp", "16"], "24 attention heads are not divisible by tp 16"),
        (["--gpus", "32", "--seq-len", "2048", "--pp", "32"], "pipeline stages exceed 24 transformer layers"),
        (["--gpus", "8", "--seq-len", "2052", "--cp", "4"], "seq-len 2052 is not divisible by 2 x cp 4 = 8"),
        (["--gpus", "8", "--seq-len", "2048", "--global-batch", "60"],
         "global batch 60 is not divisible by micro-batch 1 x dp 8 = 8"),
    ],
    ids=["degrees", "heads", "stages", "sequence", "batch"],
)  # fmt: skip
def test_configuration_that_cannot_run_is_bad_input(meshplan, one_line_error, args, fragment) -> None:
    one_line_error(meshplan(*_SMALL, *args), 2, fragment)


def test_every_configuration_problem_on_one_line(meshplan, one_line_error) -> None:
    proc = meshplan(*_SMALL, "--gpus", "48", "--seq-len", "2052", "--tp", "16", "--cp", "4")
    one_line_error(proc, 2, "does not divide 48 GPUs")
    assert "24 attention heads are not divisible by tp 16" in proc.stderr
    assert "seq-len 2052 is not divisible by 2 x cp 4" in proc.stderr


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--gpus", "0"), ("--global-batch", "-8"), ("--seq-len", "abc"), ("--tp", "0"), ("--micro-batch", "1.5")],
)
def test_non_positive_numbers_are_rejected_by_argparse(meshplan, one_line_error, flag, value) -> None:
    args = {"--gpus": "8", "--seq-len": "2048", flag: value}
    proc = meshplan(*_SMALL, *[item for pair in args.items() for item in pair])
    one_line_error(proc, 2, f"argument {flag}: must be a positive integer, got '{value}'")


def test_unknown_preset_suggests_the_nearest(meshplan, one_line_error) -> None:
    proc = meshplan("estimate", *_GPT3[:0], "--model", "gpt3-175", *_GPT3[2:])
    one_line_error(proc, 2, "unknown model 'gpt3-175'; did you mean gpt3-175b")


def test_unknown_cluster_is_bad_input(meshplan, one_line_error) -> None:
    proc = meshplan("estimate", *_GPT3[:2], "--cluster", "dgx-a1000", *_GPT3[4:])
    one_line_error(proc, 2, "dgx-a1000")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("{not json", "config.json"), ('{"model_type": "llama"}', "config.json")],
    ids=["unreadable", "incomplete"],
)
def test_bad_config_json_is_bad_input(meshplan, one_line_error, tmp_path, text, fragment) -> None:
    proc = meshplan("estimate", "--model", _config_file(tmp_path, text), *_GPT3[2:])
    one_line_error(proc, 2, fragment)


def test_missing_config_json_is_bad_input(meshplan, one_line_error, tmp_path) -> None:
    proc = meshplan("estimate", "--model", str(tmp_path / "nowhere" / "config.json"), *_GPT3[2:])
    one_line_error(proc, 2, "nowhere")


def test_missing_flags_are_named(meshplan, one_line_error) -> None:
    one_line_error(meshplan("estimate", "--model", "gpt3-175b"), 2, "missing --cluster, --gpus, --global-batch")


def test_plan_form_takes_no_configuration_flags(meshplan, one_line_error) -> None:
    one_line_error(meshplan("estimate", "--plan", "plan.json", "--tp", "2"), 2, "--plan takes no configuration flags")


def _write_plan(path: Path) -> float:
    """Search a plan for gpt-1.7b on 8 A100s, write it to ``path``, return its estimated step time.

    Goes through the search and ``build_plan`` (what ``planner.plans.build.plan`` does before its checks).
    """
    from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
    from planner.plans.build import build_plan
    from search.core import search_plan
    from search.types import SearchRequest

    model, cluster = resolve_model_arg("gpt-1.7b"), resolve_cluster_arg("dgx-a100")
    request = SearchRequest(gpus=8, global_batch=64, seq_len=2048, target="native", top_k=1, time_limit_s=None)
    plan = build_plan("gpt-1.7b", model, cluster, request, search_plan(model, cluster, request, None), False)
    path.write_text(plan.model_dump_json(indent=2))
    return plan.estimate.step_time_s


def test_plan_form_reproduces_the_plans_estimate(meshplan, tmp_path) -> None:
    step_time_s = _write_plan(tmp_path / "plan.json")
    proc = meshplan("estimate", "--plan", str(tmp_path / "plan.json"), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert _CONTRACT_KEYS <= set(result)
    assert result["step_time_s"] == pytest.approx(step_time_s, rel=1e-9)
    summary = meshplan("estimate", "--plan", str(tmp_path / "plan.json"))
    assert summary.returncode == 0 and "step time" in summary.stdout


def test_plan_form_with_missing_file_is_bad_input(meshplan, one_line_error, tmp_path) -> None:
    one_line_error(meshplan("estimate", "--plan", str(tmp_path / "plan.json")), 2, "plan.json")


def test_bad_zero_stage_is_bad_input(meshplan, one_line_error) -> None:
    one_line_error(meshplan("estimate", *_GPT3, "--zero", "4"), 2, "argument --zero: invalid choice: 4")
