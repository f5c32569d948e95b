"""The optimizer step's gradient passes besides Adam (``costmodel.optimizer.gradient_pass_bytes``):
Megatron-LM reads the fp32 main gradients of its shard once for the clipping norm
(``clip_grads.get_grad_norm_fp32``) and zeroes its whole local gradient buffer
(``zero_grad_buffer``); torchtitan frees its gradients instead of zeroing them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from costmodel.specs import ParallelConfig
from costmodel.step import ADAM_BYTES_PER_PARAM, _optimizer_time, _terms
from costmodel.table import build_cost_table
from planner.intake.models import resolve_model
from profiles import load_cluster

PARAMS = 2.0e9
"""Parameters on one pipeline rank (after TP), none of them experts."""


def _seconds(target: str, zero: int) -> tuple[float, float]:
    """(optimizer time, seconds per HBM byte) of a dp 8 rank holding :data:`PARAMS` on DGX H100."""
    table = build_cost_table(resolve_model("llama3.1-8b"), load_cluster("dgx-h100"))
    cfg = ParallelConfig(dp=8, zero=zero, global_batch=64, seq_len=4096, engine=target)
    eff = table.cluster.efficiency
    per_byte = 1 / (table.cluster.gpu.hbm_bandwidth_gbps * 1e9 * eff.memory)
    fixed = 4 * eff.kernel_overhead_us * 1e-6 + eff.step_fixed_s + cfg.num_microbatches * _terms(table, cfg).microbatch_host_s
    return _optimizer_time(table, cfg, SimpleNamespace(params=PARAMS, expert_params=0.0)) - fixed, per_byte


def test_megatron_reads_its_shard_for_the_norm_and_zeroes_the_whole_buffer() -> None:
    seconds, per_byte = _seconds("megatron", zero=1)
    shard = PARAMS / 8
    assert seconds == pytest.approx((ADAM_BYTES_PER_PARAM * shard + 4 * shard + 4 * PARAMS) * per_byte, rel=1e-12)


def test_sharded_gradients_zero_only_the_shard() -> None:
    seconds, per_byte = _seconds("megatron", zero=2)
    shard = PARAMS / 8
    assert seconds == pytest.approx((ADAM_BYTES_PER_PARAM + 4 + 4) * shard * per_byte, rel=1e-12)


def test_torchtitan_frees_gradients_instead_of_zeroing_them() -> None:
    seconds, per_byte = _seconds("torchtitan", zero=3)
    shard = PARAMS / 8
    assert seconds == pytest.approx((ADAM_BYTES_PER_PARAM + 4) * shard * per_byte, rel=1e-12)
