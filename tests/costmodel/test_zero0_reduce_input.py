"""The native runtime's ZeRO 0 (FSDP2 HSDP with one shard per replica) reduces each unit during the
backward as ZeRO 1-2 do: the largest unit's fp32 reduce-scatter input is a buffer of the backward
(``costmodel.rank_units._unit_bytes``), held at its start and, with more than one micro-batch, at its
end (``costmodel.rank_units._end_unit``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from costmodel.engines import engine_terms
from costmodel.rank_memory import FSDP2_LOW_ZERO_UNIT_BYTES, _end_unit, _layer_unit_bytes, _unit_bytes, rank_allocated_bytes
from costmodel.ranks import rank_costs
from costmodel.specs import ParallelConfig
from costmodel.step import local_config
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

LARGEST = 4672.0
SUMS = SimpleNamespace(params=11090.0, largest_layer_params=LARGEST)


def _cfg(zero: int = 0, dp: int = 1, micro_batch: int = 1, pp: int = 1, engine: str = "native") -> ParallelConfig:
    return ParallelConfig(dp=dp, pp=pp, zero=zero, micro_batch=micro_batch, global_batch=8 * dp, seq_len=16, engine=engine)


def _unit(cfg: ParallelConfig) -> float:
    return _unit_bytes(cfg, SUMS, engine_terms(cfg))  # type: ignore[arg-type]


@pytest.mark.parametrize("dp", [1, 2])
def test_zero0_holds_the_largest_units_fp32_reduce_scatter_input(dp: int) -> None:
    assert _unit(_cfg(dp=dp)) == FSDP2_LOW_ZERO_UNIT_BYTES * LARGEST == _unit(_cfg(zero=2, dp=dp))


def test_not_under_pipelining_nor_on_other_engines() -> None:
    assert _unit(_cfg(pp=2)) == 0.0  # 8 micro-batches: no-sync backwards, the stage reduces after its last
    assert _unit(_cfg(engine="torchtitan")) == 0.0  # 1-D FSDP: ZeRO 0 is not sharded there


def test_the_backward_end_holds_it_only_beside_an_earlier_micro_batchs_gradients() -> None:
    """With one micro-batch that phase already prices the running unit's sharded gradient, which
    does not exist yet: the previous unit's reduce-scatter input takes its place."""
    one, eight = _cfg(micro_batch=8), _cfg(micro_batch=1)  # global batch 8: 1 and 8 micro-batches
    assert one.num_microbatches == 1 and eight.num_microbatches == 8
    assert _end_unit(one, engine_terms(one), _unit(one)) == 0.0
    assert _end_unit(eight, engine_terms(eight), _unit(eight)) == _unit(eight) > 0.0
    two = _cfg(zero=2, micro_batch=8)
    assert _end_unit(two, engine_terms(two), _unit(two)) == _unit(two) > 0.0  # ZeRO 1-2 unchanged


CNN_TRACKER_KIB = {(1, 1): 243.3, (2, 4): 240.2}
"""torch's tracker (``meshplan check-memory``) on the differential sweep's CNN
(``tests/planner/runtime/cnn_model.py``), ZeRO 0, global batch 8, by (dp, micro-batch): d0009
(one GPU, 8 micro-batches of 1) and d0076 (dp 2, one micro-batch of 4), seed 0 of the sweep."""


@pytest.mark.parametrize("dp,micro_batch", sorted(CNN_TRACKER_KIB))
def test_the_cnn_at_zero0_is_priced_within_the_band_of_the_tracker(dp: int, micro_batch: int) -> None:
    model = Path(__file__).parents[1] / "planner" / "runtime" / "cnn_model.py"
    table = build_cost_table(resolve_model_arg(f"{model}:build"), resolve_cluster_arg("dgx-a100"))
    cfg = ParallelConfig(dp=dp, zero=0, micro_batch=micro_batch, global_batch=8, seq_len=16, engine="native")
    ranks = rank_costs(table, cfg, lambda recompute: local_config(table, cfg, recompute))
    kib = sum(rank_allocated_bytes(table, cfg, ranks.types[0], 0).values()) / 1024
    assert -0.03 <= kib / CNN_TRACKER_KIB[dp, micro_batch] - 1 <= 0.10


def test_a_pipeline_stage_with_one_micro_batch_holds_it_as_zero_1_does() -> None:
    """Its only backward is its last, run with gradient sync: each unit reduces as it ends
    (``costmodel.rank_units._pp_zero0_reduces``); with more micro-batches it does not."""
    one = _cfg(pp=2, micro_batch=8)
    assert one.num_microbatches == 1
    assert _unit(one) == FSDP2_LOW_ZERO_UNIT_BYTES * LARGEST == _unit(_cfg(zero=1, pp=2, micro_batch=8))
    assert _layer_unit_bytes(one, engine_terms(one), _unit(one)) == (0.0, 0.0, FSDP2_LOW_ZERO_UNIT_BYTES, one.param_bytes)
    assert _unit(_cfg(pp=2, micro_batch=8, engine="torchtitan")) == 0.0


PP_CNN_TRACKER_KIB = {(4, 1): 183.1, (1, 2): 167.1}
"""torch's tracker on the second stage of the differential sweep's CNN at pp 2, ZeRO 0, full
recompute, one micro-batch (global batch 8), by (tp, dp): d0092 and d0102 of the sweep's seed 0,
7.8 % and 5.1 % under before the stage's reduce-scatter input was priced layer by layer."""


@pytest.mark.parametrize("tp,dp", sorted(PP_CNN_TRACKER_KIB))
def test_the_pipelined_cnn_at_zero0_is_priced_within_the_band_of_the_tracker(tp: int, dp: int) -> None:
    model = Path(__file__).parents[1] / "planner" / "runtime" / "cnn_model.py"
    table = build_cost_table(resolve_model_arg(f"{model}:build"), resolve_cluster_arg("dgx-a100"))
    cfg = ParallelConfig(tp=tp, dp=dp, pp=2, zero=0, micro_batch=8 // dp, global_batch=8, seq_len=16, recompute="full",
                         schedule="zb-h1", sp=False, engine="native")
    ranks = rank_costs(table, cfg, lambda recompute: local_config(table, cfg, recompute))
    kib = sum(rank_allocated_bytes(table, cfg, ranks.types[ranks.rank_type[1]], 1).values()) / 1024
    assert -0.03 <= kib / PP_CNN_TRACKER_KIB[tp, dp] - 1 <= 0.10
