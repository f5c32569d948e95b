"""The last pipeline stage's bf16 logits, which ``PipelineStage.backward_one_chunk`` keeps through
its whole backward (``costmodel.rank_memory._kept_logit_bytes``), are held beside every moment after
the head's backward; the head's own moment counts them once, in the loss's transient
(``costmodel.rank_phases.layer_by_layer_end``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from costmodel.rank_memory import rank_allocated_bytes
from costmodel.rank_phases import held_bytes, layer_by_layer_end
from costmodel.ranks import rank_costs
from costmodel.specs import ParallelConfig
from costmodel.step import local_config
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

HEAD, BLOCK = (100.0, 0.0, 10.0, 0.0, 0.0, 0.0), (60.0, 10.0, 20.0, 0.0, 10.0, 20.0)
"""Two moments of a last stage's only backward (held activations, parameters done, own, next,
before, own with a gradient at the peak): the head's (its loss transient inside the 100 bytes) and a block's after it."""


def _end(logits: float) -> float:
    t = SimpleNamespace(backward_curve=(HEAD, BLOCK), params=30.0)
    phase = layer_by_layer_end(t, (0.0, None), 0.0, 0.0, (0.0, 0.0, 0.0, 0.0), ((0.0, 0.0, 0.0, 0.0), 0.0), 0.0, logits)  # type: ignore[arg-type]
    return held_bytes(phase)


def test_the_heads_moment_does_not_count_the_kept_logits_twice() -> None:
    assert _end(0.0) == 100.0
    assert _end(30.0) == 100.0  # the head's moment, its logits inside its transient
    assert _end(50.0) == 110.0  # the block's moment beside the logits kept after the head's backward


TRACKER_KIB = 294.9
"""torch's tracker (``meshplan check-memory``) on the differential sweep's custom model
(``tests/planner/runtime/custom_model.py``), dp 2, pp 2, ZeRO 3, selective recompute, one
micro-batch of 4 at sequence 16 (seed 0 case d0078): the last stage peaks in its loss's
``_log_softmax_backward_data``, priced 12.1 % over with the kept logits counted twice there."""


def test_the_last_stage_of_a_one_micro_batch_zero3_pipeline_is_within_the_band() -> None:
    model = Path(__file__).parents[1] / "planner" / "runtime" / "custom_model.py"
    table = build_cost_table(resolve_model_arg(f"{model}:build"), resolve_cluster_arg("dgx-a100"))
    cfg = ParallelConfig(dp=2, pp=2, zero=3, recompute="selective", micro_batch=4, global_batch=8, seq_len=16,
                         engine="native")
    ranks = rank_costs(table, cfg, lambda recompute: local_config(table, cfg, recompute))
    kib = sum(rank_allocated_bytes(table, cfg, ranks.rank(1), 1).values()) / 1024
    assert -0.03 <= kib / TRACKER_KIB - 1 <= 0.10
