"""The command line on mixed and degraded clusters (issue 22): plan, validate, estimate --plan,
export refusal, list clusters --cluster, and one-line errors for bad input."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

SMALL = ["--model", "gpt-1.7b", "--global-batch", "32", "--seq-len", "2048", "--tp", "1", "--pp", "1", "--micro-batch", "1", "--top-k", "1"]


BAD_CLUSTERS = [
    (["--cluster", "dgx-h100:8,no-such-preset:8", "--gpus", "16"], "no-such-preset"),
    (["--cluster", "dgx-h100:8,dgx-a100:8", "--gpus", "16", "--slow", "15=0.5,99=0.5"], "GPU 99 is past"),
    (["--cluster", "dgx-h100", "--gpus", "16", "--slow", "3=0"], "(0, 1]"),
    (["--cluster", "dgx-h100", "--gpus", "16", "--slow", "node:1=1.5"], "(0, 1]"),
    (["--cluster", "dgx-h100", "--gpus", "16", "--down", "node:0,node:1"], "every one of the cluster's 2 nodes"),
    (["--cluster", "dgx-h100:8,dgx-a100:8", "--gpus", "24"], "not 24"),
]


@pytest.mark.parametrize("args, fragment", BAD_CLUSTERS)
def test_bad_cluster_input_exits_2_with_one_line(meshplan, one_line_error, args: list[str], fragment: str) -> None:
    one_line_error(meshplan("plan", *SMALL, *args), 2, fragment)


def test_plan_validate_estimate_and_export_a_mixed_plan(meshplan, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    proc = meshplan("plan", *SMALL, "--cluster", "dgx-h100:8,dgx-a100:8", "--gpus", "16", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "replicas (16 GPUs used)" in proc.stdout
    plan = json.loads(out.read_text())
    assert meshplan("validate", str(out)).returncode == 0
    est = meshplan("estimate", "--plan", str(out), "--json")
    assert json.loads(est.stdout)["step_time_s"] == plan["estimate"]["step_time_s"]
    refused = meshplan("export", str(out), "--to", "torchtitan")
    assert refused.returncode == 2 and "uneven data-parallel shares" in refused.stderr


def test_list_clusters_shows_the_groups(meshplan) -> None:
    proc = meshplan("list", "clusters", "--cluster", "dgx-h100:16,dgx-a100:32", "--slow", "5=0.5", "--down", "node:3")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any("dgx-h100" in x and "0..15" in x and "5=0.5" in x for x in lines)
    assert any("dgx-a100" in x and "16..47" in x and x.rstrip().endswith("3") for x in lines)
    assert any(x.startswith("link 0-1") for x in lines)


def test_run_refuses_a_bad_injected_slowdown_in_one_line(meshplan, one_line_error, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text("{}")  # the flag is refused before the plan is read
    one_line_error(meshplan("run", str(plan), "--nproc-per-node", "4", "--inject-slowdown", "3=0"), 2, "--inject-slowdown '3=0'")


JOB = ["--model", "gpt-1.7b", "--global-batch", "32", "--seq-len", "2048", "--tp", "1", "--pp", "1"]


@pytest.mark.parametrize("args, fragment", BAD_CLUSTERS)
def test_estimate_refuses_bad_cluster_input_in_one_line(meshplan, one_line_error, args: list[str], fragment: str) -> None:
    one_line_error(meshplan("estimate", *JOB, *args), 2, fragment)


@pytest.mark.parametrize("args, fragment", BAD_CLUSTERS + [
    (["--cluster", "dgx-h100,dgx-a100:8", "--gpus", "8"], "not both"),
    (["--cluster", "dgx-h100:8,dgx-a100:8", "--gpus", "16", "--dp", "16"], "--dp"),
])
def test_sweep_refuses_bad_cluster_input_in_one_line(meshplan, one_line_error, args: list[str], fragment: str) -> None:
    one_line_error(meshplan("sweep", *JOB, *args), 2, fragment)


def test_estimate_prices_a_uniform_configuration_on_groups(meshplan) -> None:
    proc = meshplan("estimate", *JOB, "--cluster", "dgx-h100:8,dgx-a100:8", "--gpus", "16", "--slow", "3=0.5", "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["config"]["dp"] == 16 and any("uniform configuration on a heterogeneous cluster" in a for a in got["assumptions"])
    refused = meshplan("estimate", *JOB, "--cluster", "dgx-h100:8,dgx-a100:8", "--gpus", "16", "-o", "x.json")
    assert refused.returncode == 2 and "meshplan plan -o" in refused.stderr


def test_sweep_plans_a_mixed_cluster_with_the_heterogeneous_search(meshplan) -> None:
    proc = meshplan("sweep", *JOB, "--micro-batch", "1", "--cluster", "dgx-h100:8,dgx-a100:8", "--gpus", "16", "--slow", "3=0.5", "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["request"]["clusters"] == ["dgx-h100:8,dgx-a100:8"] and got["request"]["slow"] == ["3=0.5"]
    assert [p["status"] for p in got["points"]] == ["ok"]


def _refused_file(folder: Path, kind: str) -> tuple[Path, str]:
    """A cluster file the gate refuses (issue 35): nested 100,000 deep, or a 17 MiB groups file."""
    path = folder / f"{kind}.json"
    if kind == "nested":
        path.write_text("[" * 100_000 + "]" * 100_000)
        return path, "nests 100000 levels deep (at most 64)"
    path.write_text(json.dumps({"groups": [{"cluster": "dgx-a100", "gpus": 8}], "about": "x" * (17 * 2**20)}))
    return path, "is 17 MiB, over the 16 MiB such a file may be"


@pytest.mark.parametrize("command", ["plan", "estimate", "sweep"])
@pytest.mark.parametrize("kind", ["nested", "big-groups"])
def test_cluster_files_the_gate_refuses_exit_2(meshplan, one_line_error, tmp_path: Path, command: str, kind: str) -> None:
    path, fragment = _refused_file(tmp_path, kind)
    one_line_error(meshplan(command, *JOB, "--cluster", str(path), "--gpus", "8"), 2, fragment)


@pytest.mark.parametrize("kind", ["nested", "big-groups"])
def test_the_api_raises_input_error_for_them(tmp_path: Path, kind: str) -> None:
    import planner
    from planner.errors import InputError

    path, fragment = _refused_file(tmp_path, kind)
    job = {"model": "gpt-1.7b", "cluster": str(path), "gpus": 8, "global_batch": 32, "seq_len": 2048}
    for call in (lambda: planner.estimate(**job, tp=1, pp=1), lambda: planner.plan(**job), lambda: planner.plan(**job, slow="3=0.5")):
        with pytest.raises(InputError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
            call()


ANY_SIZE = ["--model", "gpt-1.7b", "--global-batch", "48", "--seq-len", "2048", "--cluster", "dgx-a100"]


@functools.cache
def _plain_plan_exit(meshplan, gpus: str) -> int:
    """Exit status of the plain ``meshplan plan`` on ``gpus`` GPUs, run once per size (three cases share 12)."""
    return meshplan("plan", *ANY_SIZE, "--gpus", gpus, "--top-k", "1").returncode


@pytest.mark.parametrize("gpus, flags", [
    ("4", ["--slow", "3=0.5"]), ("3", ["--slow", "0=0.5"]), ("12", ["--slow", "9=0.5"]), ("12", ["--down", "node:0"]),
    ("12", ["--down", "node:1", "--slow", "2=0.7"]),
])
def test_slow_and_down_take_every_size_the_plain_command_takes(meshplan, gpus: str, flags: list[str]) -> None:
    """Issue 35: a partial node (half a dgx-a100, or one and a half) is planned with --slow / --down too."""
    assert _plain_plan_exit(meshplan, gpus) == 0
    for command in ("plan", "estimate"):
        extra = ["--tp", "1", "--pp", "1"] if command == "estimate" else ["--top-k", "1"]
        proc = meshplan(command, *ANY_SIZE, "--gpus", gpus, *flags, *extra)
        assert proc.returncode == 0, f"{command}: {proc.stderr}"


def test_a_slowdown_of_one_is_the_plain_plan_on_a_partial_node(meshplan, tmp_path: Path) -> None:
    plain, same = tmp_path / "plain.json", tmp_path / "same.json"
    assert meshplan("plan", *ANY_SIZE, "--gpus", "12", "-o", str(plain)).returncode == 0
    assert meshplan("plan", *ANY_SIZE, "--gpus", "12", "--slow", "3=1", "-o", str(same)).returncode == 0
    assert plain.read_bytes() == same.read_bytes()
