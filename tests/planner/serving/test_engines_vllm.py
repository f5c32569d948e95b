"""vLLM's own argument code reads every vLLM export (issue 35).

Each ``vllm serve`` call of an exported launch script (run through bash with stub engines, so the
words are the ones vLLM would receive) goes through vLLM 0.10.1's ``vllm serve`` parser
(``make_arg_parser``: unknown flags and bad values exit 2), ``validate_parsed_serve_args``,
``AsyncEngineArgs.from_cli_args`` and vLLM's ``ParallelConfig`` / ``CacheConfig`` validators, in a
child process, with the stand-ins ``engines/vllm_engine_args.py`` lists. The vLLM wheel (about
400 MB, once) is fetched from the registry at test time and only its Python files are extracted
(``engines/wheel.py``). Without a registry the tests are skipped, saying why.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.serving.export import export_serving
from planner.serving.schema import ServingPlan
from tests.planner.serving.engines.wheel import FetchError, Wheel
from tests.planner.serving.test_export import _argv_lines

WHEEL = Wheel(dist="vllm", version="0.10.1", filename="vllm-0.10.1-cp38-abi3-manylinux1_x86_64.whl",
              sha256="df04a14116750f05099b84db4474935db80e9b13e8b7a6048d3a3cd64aa98b0c", members=("vllm/",), suffixes=(".py",))
SCRIPT = Path(__file__).with_name("engines") / "vllm_engine_args.py"
PLANS = ("llama_serving_plan", "llama_aggregated_plan", "moe_plan", "gptoss_blackwell_plan")
PROGRAM = ["vllm", "serve"]


def _read(argvs: list[list[str]], tmp: Path) -> list[dict]:
    """vLLM's reading of each argv (the words after ``vllm serve``), from the child process."""
    try:
        root = WHEEL.root()
    except FetchError as err:
        pytest.skip(f"vLLM's argument code could not be fetched: {err}")
    out = tmp / "read.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(root), str(out), "8"], input=json.dumps(argvs), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def launches(request, tmp_path_factory) -> dict[str, tuple[ServingPlan, list[list[str]]]]:
    out = {}
    for which in PLANS:
        plan = request.getfixturevalue(which)
        calls = _argv_lines(export_serving(plan, "vllm", 8), tmp_path_factory.mktemp(which))
        out[which] = (plan, [argv[len(PROGRAM):] for argv in calls if argv[: len(PROGRAM)] == PROGRAM])
    return out


@pytest.fixture(scope="module")
def readings(launches, tmp_path_factory) -> dict[str, list[dict]]:
    """Every launch and the bad variants of one, read in one child process (vLLM imports in about 10 s)."""
    first = launches["llama_aggregated_plan"][1][0]
    bad = {"block size": first + ["--block-size", "17"], "flag": first + ["--tensor-parallel-degree", "2"],
           "memory": first + ["--gpu-memory-utilization", "1.5"], "wider than the node": first + ["--tensor-parallel-size", "16"]}
    argvs = [argv for which in PLANS for argv in launches[which][1]] + list(bad.values())
    read = iter(_read(argvs, tmp_path_factory.mktemp("vllm")))
    out = {which: [next(read) for _ in launches[which][1]] for which in PLANS}
    out["bad"] = [next(read) for _ in bad]
    return out


@pytest.mark.parametrize("which", PLANS)
def test_vllm_accepts_every_launch_with_the_plans_sizes(launches, readings, which: str) -> None:
    plan, argvs = launches[which]
    assert argvs and len(readings[which]) == len(argvs)
    groups = {(g.tp, g.pp, max(1, g.concurrency_per_worker), g.ep > 1 or g.attention_dp) for g in plan.estimate.deployment.groups}
    for got in readings[which]:
        assert "error" not in got, got
        assert (got["tp"], got["pp"], got["max_num_seqs"], got["expert_parallel"]) in groups
        assert got["max_model_len"] == plan.request.isl + plan.request.osl
        assert (got["kv_connector"] is not None) == (plan.estimate.deployment.mode == "disaggregated")


def test_vllms_checks_refuse_what_vllm_refuses(readings) -> None:
    """The check can fail: argparse choices and flags, the memory fraction, an instance wider than the node."""
    errors = [got.get("error", "") for got in readings["bad"]]
    assert errors[0] == errors[1] == "argparse exit 2"
    assert "GPU memory utilization must be less than 1.0" in errors[2]
    assert "Ray is required for multi-node inference" in errors[3]


@pytest.mark.parametrize("which", PLANS)
def test_the_recipe_the_estimate_prices_is_the_one_vllm_launches(launches, readings, which: str) -> None:
    """gpt-oss's MXFP4 on Blackwell: vLLM reads the recipe's fused all-reduce pass and FP8 cache, and no
    ``--quantization`` (the checkpoint states its own MXFP4); every other plan launches without the pass."""
    plan = launches[which][0]
    recipe = which == "gptoss_blackwell_plan"
    assert plan.request.kv_dtype == ("fp8" if recipe else plan.request.kv_dtype)
    for got in readings[which]:
        assert got["fi_allreduce_fusion"] is recipe
        if recipe:
            assert got["quantization"] is None and got["kv_cache_dtype"] == "fp8"
