"""A recomputed layer's transient holds its stored activations again (``costmodel.ranks.stored_in_work``,
``RankSums.work_stored_bytes``): a backward's start adds the transient net of them to the in-flight
activations (``costmodel.rank_phases.backward_start``), by hand and against torch's tracker."""

from __future__ import annotations

from pathlib import Path

import pytest

from costmodel.rank_phases import backward_start
from costmodel.ranks import rank_costs, stored_in_work
from costmodel.specs import ParallelConfig
from costmodel.step import local_config
from costmodel.table import build_cost_table

RUNTIME_TESTS = Path(__file__).resolve().parents[1] / "planner" / "runtime"
BAND = (-0.03, 0.10)
"""check-memory's band on predicted / measured - 1."""
B, S = 8, 16


def test_the_largest_net_transient_decides() -> None:
    """The largest transient less the largest of each layer's own addition: its transient net of the
    stored bytes it holds again (never below 0)."""
    assert stored_in_work([90.0], [25.0]) == 25.0  # one recomputed block: its stored part
    assert stored_in_work([90.0], [0.0]) == 0.0  # nothing held again: the transient comes on top
    assert stored_in_work([100.0, 90.0], [0.0, 25.0]) == 0.0  # the loss's, larger than the block's net 65
    assert stored_in_work([70.0, 90.0], [0.0, 25.0]) == 20.0  # the block's 65 net beside a loss of 70: 70 is added
    assert stored_in_work([10.0], [25.0]) == 10.0  # a transient under the stored activations adds nothing
    assert stored_in_work([], []) == 0.0


def _tracked_selective_block() -> float:
    """Peak bytes of activations and temporaries (the block's input and parameter gradients apart)
    over a forward and backward of the differential's custom block in bf16, run under the runtime's
    op-level selective checkpoint (``planner.runtime.recompute``), measured with torch's MemTracker."""
    import sys

    import torch
    from torch.distributed._tools.mem_tracker import MemTracker

    from planner.runtime.recompute import apply_recompute

    sys.path.insert(0, str(RUNTIME_TESTS))
    try:
        from custom_model import HIDDEN, Layer
    finally:
        sys.path.remove(str(RUNTIME_TESTS))
    torch.manual_seed(0)
    layer = Layer().to(torch.bfloat16)
    apply_recompute(layer, "selective")
    x = torch.randn(B, S, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    tracker = MemTracker()
    tracker.track_external(layer, x)
    with tracker:
        y = layer(x)
        y.backward(torch.ones_like(y))
    peak = tracker.get_tracker_snapshot("peak")
    return sum(v for per_device in peak.values() for k, v in per_device.items() if str(k).rsplit(".", 1)[-1] in ("ACT", "TEMP"))


def test_a_selective_block_backward_start_against_the_tracker() -> None:
    """The second stage of the custom model at pp 4 (one block, as case d0218 of the differential
    sweep, without cp), one micro-batch of 8 x 16: its backward's start holds the stage output it
    sends and the recomputed block, whose activations include the 50 KiB it stored. The tracker's
    peak (inside the block's backward, its output beside it) is 123.0 KiB; the start priced 122.0,
    where the stored activations beside the whole transient priced 172.0 (+40 %)."""
    pytest.importorskip("torch")
    from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

    spec = resolve_model_arg(f"{RUNTIME_TESTS / 'custom_model.py'}:build")
    table = build_cost_table(spec, resolve_cluster_arg("dgx-a100"))
    cfg = ParallelConfig(pp=4, stage_layers=[1, 1, 2, 3], micro_batch=B, global_batch=B, seq_len=S, recompute="selective", engine="native")
    t = rank_costs(table, cfg, lambda mode: local_config(table, cfg, mode)).rank(1)
    held = t.act_bytes + t.send_bytes  # one micro-batch in flight, its output kept until its backward
    assert t.work_stored_bytes == (t.act_bytes, t.act_bytes)
    priced = backward_start(t, held, 0.0, None).acts
    assert priced == t.send_bytes + t.work_bytes
    measured = _tracked_selective_block()
    assert BAND[0] <= priced / measured - 1 <= BAND[1], (priced, measured)
    assert (priced + t.act_bytes) / measured - 1 > BAND[1]  # the stored activations counted twice


def test_other_engines_keep_the_whole_transient_on_top() -> None:
    """Only the native runtime, where the tracker measured it, prices the transient net."""
    from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

    table = build_cost_table(resolve_model_arg(f"{RUNTIME_TESTS / 'custom_model.py'}:build"), resolve_cluster_arg("dgx-a100"))
    cfg = ParallelConfig(pp=4, stage_layers=[1, 1, 2, 3], micro_batch=B, global_batch=B, seq_len=S, recompute="selective",
                         engine="torchtitan")
    t = rank_costs(table, cfg, lambda mode: local_config(table, cfg, mode)).rank(1)
    assert t.work_stored_bytes == (0.0, 0.0)


def test_a_fully_recomputed_generic_layer_adds_its_whole_transient() -> None:
    """The differential's CNN at tp 4, pp 2, full recompute (case d0092): a block's stored output is the
    next block's checkpointed input, and its recomputation rebuilds its own; its first stage peaks at a
    recomputed block's last ReLU with the 48.1 KiB transient beside every stored output."""
    from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

    table = build_cost_table(resolve_model_arg(f"{RUNTIME_TESTS / 'cnn_model.py'}:build"), resolve_cluster_arg("dgx-a100"))
    cfg = ParallelConfig(tp=4, pp=2, micro_batch=8, global_batch=8, seq_len=16, recompute="full", engine="native")
    t = rank_costs(table, cfg, lambda mode: local_config(table, cfg, mode)).rank(0)
    assert t.work_bytes > 0 and t.work_stored_bytes == (0.0, 0.0)
