"""Adding micro-batch gradients into the accumulated ones (``costmodel.optimizer.accumulation_bytes``):
Megatron-LM fuses it into the weight-gradient GEMM (``--gradient-accumulation-fusion``,
``wgrad_gemm_accum_fp32`` writes ``main_grad`` with beta = 1), so it costs nothing there; without the
fusion (Megatron-LM before late 2021, DeepSpeed's pipeline engine, torchtitan) every micro-batch
after the first reads its gradient and reads and writes the accumulator."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from costmodel.specs import ParallelConfig
from costmodel.step import _accumulation_time, estimate_step
from costmodel.table import build_cost_table
from planner.intake.models import resolve_model
from profiles import load_cluster

PARAMS = 2.0e9
"""Parameters on one pipeline rank (after TP), none of them experts."""


def _table():
    return build_cost_table(resolve_model("gpt3-175b"), load_cluster("dgx-a100"))


def _per_byte(table) -> float:  # noqa: ANN001
    return 1 / (table.cluster.gpu.hbm_bandwidth_gbps * 1e9 * table.cluster.efficiency.memory)


def _seconds(**changes) -> float:
    table = _table()
    cfg = ParallelConfig(**{**dict(tp=8, pp=8, dp=2, global_batch=64, seq_len=2048), **changes})
    return _accumulation_time(table, cfg, SimpleNamespace(params=PARAMS, expert_params=0.0)) / _per_byte(table)


def test_megatron_fuses_accumulation_into_the_gemm() -> None:
    assert _seconds(engine="megatron") == 0.0


def test_native_accumulates_as_fsdp2_does() -> None:
    """The native runtime (FSDP2 under torch pipelining) adds each micro-batch's gradients in a
    kernel of its own, as torchtitan does: no fusion into the weight-gradient GEMM."""
    assert _seconds(engine="native") == _seconds(engine="torchtitan") > 0.0


def test_unfused_megatron_adds_every_micro_batch_after_the_first() -> None:
    """32 micro-batches of fp16 gradients into an fp16 accumulator (SC21's runs): 31 x (2 + 2 + 2) B."""
    assert _seconds(engine="megatron", grad_accum_fusion=False, grad_bytes=2) == pytest.approx(31 * 6 * PARAMS, rel=1e-12)
    assert _seconds(engine="megatron", grad_accum_fusion=False) == pytest.approx(31 * 10 * PARAMS, rel=1e-12)  # fp32 main grads


def test_deepspeed_pipeline_accumulates_through_autograd() -> None:
    assert _seconds(engine="deepspeed", zero=1, grad_bytes=2) == pytest.approx(31 * 6 * PARAMS, rel=1e-12)


def test_sharded_gradients_add_only_the_reduced_shard() -> None:
    """torchtitan without PP reduce-scatters every micro-batch (fp32) and adds it into the fp32 shard."""
    shard = PARAMS / 16
    assert _seconds(engine="torchtitan", zero=3, tp=1, pp=1, dp=16, micro_batch=1) == pytest.approx(3 * 12 * shard, rel=1e-12)


def test_one_micro_batch_accumulates_nothing() -> None:
    assert _seconds(engine="deepspeed", zero=1, global_batch=2) == 0.0


def test_the_adds_lengthen_the_step_by_exactly_their_time() -> None:
    table = _table()
    base = ParallelConfig(tp=8, pp=8, dp=1, global_batch=64, seq_len=2048, recompute="full", engine="megatron", grad_bytes=2)
    fused, unfused = estimate_step(table, base), estimate_step(table, base.model_copy(update={"grad_accum_fusion": False}))
    slowest = max(_accumulation_time(table, unfused.config, t) for t in unfused.ranks.types)
    assert slowest > 0 and unfused.step_time_s == pytest.approx(fused.step_time_s + slowest, rel=1e-12)
    assert unfused.time_breakdown_s["compute"] == pytest.approx(fused.time_breakdown_s["compute"] + slowest, rel=1e-12)
