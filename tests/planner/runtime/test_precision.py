"""The runtime's precision: the plan's bf16 compute with fp32 master weights, fp32 where the CPU has no
native bf16 or the plan prices 4-byte parameters, and FSDP2's policy for each."""

from __future__ import annotations

import pytest
import torch

import planner.runtime.precision as precision
from plan_helpers import llama_spec, make_plan


@pytest.fixture(scope="module")
def plan():
    spec = llama_spec(2)
    return make_plan(spec, {}, spec=spec)


def test_cuda_computes_in_bf16_with_fp32_master_weights_and_reduction(plan) -> None:
    p = precision.plan_precision(plan, "cuda")
    assert (p.compute, p.master, p.reduce, p.mixed, p.fp8) == (torch.bfloat16, torch.float32, torch.float32, True, False)
    policy = precision.mp_policy(p)
    assert policy.param_dtype == torch.bfloat16 and policy.reduce_dtype == torch.float32


def test_cpu_follows_its_native_bf16_support(plan, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda: True)
    assert precision.plan_precision(plan, "cpu").compute == torch.bfloat16
    monkeypatch.setattr(precision, "cpu_has_fast_bf16", lambda: False)
    slow = precision.plan_precision(plan, "cpu")
    assert slow.compute == torch.float32 and not slow.mixed and "no native bf16" in slow.reason
    assert precision.mp_policy(slow).param_dtype is None  # no cast


def test_four_byte_parameters_train_in_fp32_and_fp8_is_the_plans(plan) -> None:
    fp32 = plan.model_copy(update={"config": plan.config.model_copy(update={"param_bytes": 4})})
    assert precision.plan_precision(fp32, "cuda").compute == torch.float32
    fp8 = plan.model_copy(update={"config": plan.config.model_copy(update={"precision": "fp8"})})
    assert precision.plan_precision(fp8, "cuda").fp8 and precision.plan_precision(fp8, "cuda").fp8_recipe == "tensorwise"


def test_adamw_is_fused_on_cuda_only() -> None:
    param = [torch.nn.Parameter(torch.zeros(2))]
    assert not precision.make_optimizer(torch.device("cpu"))(param).defaults["fused"]
