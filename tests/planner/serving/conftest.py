"""Serving plans shared by the tests: searched once per session (each search takes well under a second)."""

from __future__ import annotations

import pytest

from planner.serving.plan import serve_plan
from planner.serving.schema import ServingPlan

LLAMA = dict(model="llama3.1-70b", cluster="dgx-h100", gpus=8, isl=1000, osl=1000, ttft_ms=1000, tpot_ms=50, precision="fp8")


@pytest.fixture(scope="session")
def llama_serving_plan() -> ServingPlan:
    """Llama 3.1 70B on 8 H100 (the search picks a disaggregated deployment)."""
    return serve_plan(**LLAMA)


@pytest.fixture(scope="session")
def llama_aggregated_plan() -> ServingPlan:
    return serve_plan(**LLAMA, disaggregation="off")


@pytest.fixture(scope="session")
def gptoss_blackwell_plan() -> ServingPlan:
    """gpt-oss-120b's MXFP4 checkpoint on 8 B200 under vLLM: the estimate follows vLLM's Blackwell recipe."""
    return serve_plan(model="gpt-oss-120b", cluster="dgx-b200", gpus=8, isl=1024, osl=1024, tpot_ms=20,
                      precision="fp4", engine="vllm", disaggregation="off")


@pytest.fixture(scope="session")
def moe_plan() -> ServingPlan:
    """Qwen3-235B on 16 H200 with expert parallelism and attention DP available."""
    return serve_plan(model="qwen3-235b-a22b", cluster="dgx-h200", gpus=16, isl=2000, osl=500, tpot_ms=80,
                      precision="fp8", disaggregation="off")
