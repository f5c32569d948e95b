"""The FSDP2 unit's working set (``costmodel.rank_units``): where a pipeline stage's no-sync backwards
accumulate whole fp32 gradients under ZeRO 0-2, the running layer's bf16 gradients beside the
accumulators (``_layer_unit_bytes``' fourth part), measured with torch's tracker on the differential
sweep's CNN (pp 2, dp 2, ZeRO 0, GPipe, four micro-batches of one image, case d0089 at draw seed 1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from costmodel.engines import engine_terms
from costmodel.rank_units import _layer_unit_bytes
from costmodel.specs import ParallelConfig
from costmodel.rank_memory import rank_allocated_bytes
from costmodel.ranks import rank_costs
from costmodel.step import local_config
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg
from planner.intake.trace import trace_module

sys.path.insert(0, str(Path(__file__).parents[1] / "planner" / "runtime"))
import cnn_model  # noqa: E402

KIB = 1024.0
D0089_TRACKER_KIB = 174.30
"""torch's tracker, case d0089 at seed 1, its last stage (the strided and last blocks and the head):
the peak inside its second backward, the last block's first convolution backward, beside both its
convolutions' bf16 weight gradients and the 33.2 KiB of fp32 accumulators (-4.5 % priced without them)."""


def _cfg(zero: int, microbatches: int) -> ParallelConfig:
    return ParallelConfig(dp=2, pp=2, zero=zero, micro_batch=1, global_batch=2 * microbatches, seq_len=16, engine="native",
                          recompute="none", schedule="gpipe", sp=False)


@pytest.mark.parametrize("zero", [0, 1, 2])
def test_accumulating_stages_hold_the_running_layers_bf16_gradient(zero: int) -> None:
    cfg = _cfg(zero, 4)
    terms = engine_terms(cfg)
    assert terms.pp_unsharded_grads
    assert _layer_unit_bytes(cfg, terms, 0.0) == (0.0, 0.0, 0.0, cfg.param_bytes)  # no unit of its own (_unit_bytes: 0)
    one = _cfg(zero, 1)  # one micro-batch: its only backward reduces unit by unit (or, ZeRO 0 alone, keeps nothing)
    assert _layer_unit_bytes(one, engine_terms(one), 1.0)[2] > 0.0


def test_zero_3_stages_keep_their_chunks_gathered_instead() -> None:
    cfg = _cfg(3, 4)
    assert _layer_unit_bytes(cfg, engine_terms(cfg), 1.0) == (0.0, 0.0, 0.0, 0.0)  # the no-sync phases price them


def test_the_cnn_last_stage_meets_the_trackers_peak() -> None:
    spec = trace_module(*cnn_model.build(), name="cnn", micro_batch=1, seq_len=16).spec
    table = build_cost_table(spec, resolve_cluster_arg("dgx-a100"))
    cfg = _cfg(0, 4)
    ranks = rank_costs(table, cfg, lambda recompute: local_config(table, cfg, recompute))
    t = ranks.types[ranks.rank_type[1]]
    parts = rank_allocated_bytes(table, cfg, t, 1)
    assert parts["buffers"] >= cfg.param_bytes * t.largest_layer_params  # the last block's bf16 gradients
    assert -0.03 <= sum(parts.values()) / KIB / D0089_TRACKER_KIB - 1 <= 0.10
