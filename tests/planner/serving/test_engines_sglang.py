"""SGLang's own argument code reads every SGLang export (issue 35).

Each ``python -m sglang.launch_server`` call of an exported launch script (run through bash with stub
engines, so the words are the ones SGLang would receive) goes through SGLang 0.4.10's
``prepare_server_args`` (its argparse definitions: unknown flags and bad values exit 2) and
``ServerArgs.__post_init__`` / ``check_server_args`` (parallel sizes against nodes, DP attention,
chunked prefill against page size ...), fetched from the registry at test time with the shims
``engines/sglang_server_args.py`` lists. Without a registry the tests are skipped, saying why.
"""

from __future__ import annotations

import pytest

from planner.serving.export import export_serving
from planner.serving.schema import ServingPlan
from profiles import load_cluster
from tests.planner.serving.engines.wheel import FetchError
from tests.planner.serving.test_export import _argv_lines

ARCHITECTURES = {"llama3.1-70b": "LlamaForCausalLM", "qwen3-235b-a22b": "Qwen3MoeForCausalLM",
                 "gpt-oss-120b": "GptOssForCausalLM"}
"""``architectures`` of each preset's Hugging Face config.json (meta-llama/Llama-3.1-70B,
Qwen/Qwen3-235B-A22B, openai/gpt-oss-120b), which ``check_server_args`` reads."""
PROGRAM = ["python", "-m", "sglang.launch_server"]
ROUTER = ["python", "-m", "sglang.srt.disaggregation.mini_lb"]


@pytest.fixture(scope="module")
def sglang():
    from tests.planner.serving.engines import sglang_server_args

    try:
        sglang_server_args.WHEEL.root()
    except FetchError as err:
        pytest.skip(f"SGLang's server_args.py could not be fetched: {err}")
    return sglang_server_args


def _launches(plan: ServingPlan, tmp_path) -> list[list[str]]:
    calls = _argv_lines(export_serving(plan, "sglang", 8), tmp_path)
    return [argv[len(PROGRAM):] for argv in calls if argv[: len(PROGRAM)] == PROGRAM]


def _check(sglang, plan: ServingPlan, argv: list[str]):
    memory = load_cluster(plan.cluster).gpu.hbm_gib * 1024
    return sglang.server_args(argv, memory, ARCHITECTURES[plan.model])


@pytest.mark.parametrize("which", ["llama_serving_plan", "llama_aggregated_plan", "moe_plan", "gptoss_blackwell_plan"])
def test_sglang_accepts_every_launch_with_the_plans_sizes(sglang, which: str, request, tmp_path) -> None:
    plan: ServingPlan = request.getfixturevalue(which)
    launches = _launches(plan, tmp_path)
    assert launches
    groups = {(g.tp, g.pp, g.ep, max(1, g.concurrency_per_worker)) for g in plan.estimate.deployment.groups}
    for argv in launches:
        args = _check(sglang, plan, argv)
        assert (args.tp_size, args.pp_size, args.ep_size, args.max_running_requests) in groups
        assert args.context_length == plan.request.isl + plan.request.osl
        assert args.quantization == (None if plan.model == "gpt-oss-120b" else {"fp8": "fp8", "fp4": "modelopt_fp4"}.get(plan.request.precision))


def test_sglangs_parser_refuses_what_it_does_not_define(sglang, llama_aggregated_plan, tmp_path) -> None:
    """The check can fail: a value outside SGLang's choices, a flag it lacks, sizes its checks refuse."""
    argv = _launches(llama_aggregated_plan, tmp_path)[0]
    for bad in (["--kv-cache-dtype", "fp8"], ["--tensor-parallel-degree", "2"]):
        with pytest.raises(SystemExit):
            _check(sglang, llama_aggregated_plan, argv + bad)
    with pytest.raises(AssertionError, match="divisible by number of nodes"):
        _check(sglang, llama_aggregated_plan, argv + ["--tp-size", "3", "--nnodes", "2"])


def test_sglangs_router_reads_the_disaggregated_export(sglang, llama_serving_plan, tmp_path) -> None:
    """The mini_lb router line: SGLang's LBArgs take every prefill and decode server the script starts."""
    plan = llama_serving_plan
    assert plan.estimate.deployment.mode == "disaggregated"
    calls = _argv_lines(export_serving(plan, "sglang", 8), tmp_path)
    routers = [argv[len(ROUTER):] for argv in calls if argv[: len(ROUTER)] == ROUTER]
    assert len(routers) == 1
    args = sglang.router_args(routers[0])
    servers = {argv[argv.index("--port") + 1]: argv[argv.index("--disaggregation-mode") + 1] for argv in _launches(plan, tmp_path)}
    assert sorted(url.rsplit(":", 1)[1] for url, _ in args.prefill_infos) == sorted(p for p, r in servers.items() if r == "prefill")
    assert sorted(url.rsplit(":", 1)[1] for url in args.decode_infos) == sorted(p for p, r in servers.items() if r == "decode")
