"""Column projections reading one input reduce its gradient once per sublayer, as Megatron-LM does
(``planner.runtime.column_group``): counted with a dispatch mode over one training step of a
two-block Llama at tp 2 on the fake process group. Numerics are the equality tests' (``test_equality``:
tp, tp + SP, TP with FSDP, pipelining and recomputation train as the unsplit model)."""

from __future__ import annotations

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from plan_helpers import BATCH, SEQ, llama_spec, make_plan
from planner.runtime.apply import apply
from planner.runtime.precision import FP32
from planner.runtime.init import materialize, synthetic_tokens
from planner.runtime.memcheck.build import start_fake_world, stop_fake_world
from planner.runtime.models import build_model

BLOCKS = 2


class _Collectives(TorchDispatchMode):
    """Counts the functional collectives DTensor issues, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.count: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        if func.namespace == "_c10d_functional" and func.__name__.split(".")[0] != "wait_tensor":
            self.count[func.__name__.split(".")[0]] += 1
        return func(*args, **(kwargs or {}))


def _step_collectives(sp: bool, recompute: str = "none") -> collections.Counter[str]:
    spec = llama_spec(BLOCKS)
    plan = make_plan(spec, dict(tp=2, sp=sp, recompute=recompute), spec=spec)
    start_fake_world(plan)
    try:
        # fp32 without FSDP2: the TP collectives alone (mixed precision wraps dp 1 in FSDP2, whose gradient
        # reduction of the tp-replicated norm weights adds an all-reduce per norm)
        runtime = apply(plan, build_model(spec), device_type="cpu", precision=FP32)
        torch.manual_seed(0)
        materialize(runtime, build_model(spec, device="cpu"))
        with _Collectives() as probe:
            runtime.step(synthetic_tokens(0, 0, BATCH, SEQ, 128))
        return probe.count
    finally:
        stop_fake_world()


def test_without_sp_one_all_reduce_per_sublayer_each_way() -> None:
    """Forward: attention and MLP outputs (2 per block) and the vocab-parallel embedding; backward:
    the attention's and the MLP's input gradients (2 per block, not one per q / k / v / gate / up)
    and the head's input gradient."""
    count = _step_collectives(sp=False)
    assert count["all_reduce"] == 4 * BLOCKS + 2 and count["reduce_scatter_tensor"] == 0


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_with_sp_one_gather_and_one_reduce_scatter_per_sublayer_each_way(recompute: str) -> None:
    """Korthikanti et al. 2022 §4.2.2: g (all-gather forward, reduce-scatter backward) before each
    sublayer and ḡ (reduce-scatter forward, all-gather backward) after it, 2 of each per block each
    way, plus the embedding's scatter and the head's gather; no all-reduce of activations. Full
    recomputation repeats the forward gathers (and the attention's reduce-scatter: the checkpoint
    stops once it has the tensors backward needs)."""
    count = _step_collectives(sp=True, recompute=recompute)
    again = 2 * BLOCKS if recompute == "full" else 0
    assert count["all_gather_into_tensor"] == 4 * BLOCKS + 2 + again
    assert count["reduce_scatter_tensor"] == 4 * BLOCKS + 2 + again // 2
    assert count["all_reduce"] == 0
