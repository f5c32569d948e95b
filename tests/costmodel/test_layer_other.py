"""The backward transient of a recomputed traced layer (``costmodel.layer_other.recompute_transient_bytes``),
against what torch's tracker measured on the differential sweep's CNN (``tests/planner/runtime/cnn_model.py``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from costmodel.layer_other import RECOMPUTE_LIVE_OPERANDS, generic_cost, recompute_transient_bytes
from costmodel.local import LocalConfig
from costmodel.specs import GenericLayer
from profiles import load_cluster

KIB = 1024.0


def _block() -> GenericLayer:
    """The CNN's identity residual block as the trace measures it: 8 channels of 8 x 8 in bf16 (1 KiB
    per image), five saved tensors (its input, both convolutions' outputs, both ReLUs' results) and
    the two GroupNorms' statistics."""
    return GenericLayer(name="*", params=1184, fwd_flops_per_token=147456.0, fwd_mem_bytes_per_token=11344.0,
                        activation_bytes_per_token=5136.0, output_bytes_per_token=1024.0, selective_saved_bytes_per_token=0.0)


@pytest.mark.parametrize(("recompute", "micro_batch", "measured_kib"), [("full", 4, 24.06), ("selective", 8, 48.12)])
def test_a_recomputed_block_holds_its_unsaved_operands(recompute: str, micro_batch: int, measured_kib: float) -> None:
    """Measured with torch's tracker: the recomputed block peaks at its final ReLU 24.06 KiB (case
    d0102: full, micro-batch 4) and 48.12 KiB (case d0274: selective, micro-batch 8) over a base that
    already holds its input and its output's gradient: four recomputed saved tensors, the statistics,
    ``y`` and the sum. Its stored activations and the gradient alone (the price before) miss one output."""
    cfg = LocalConfig(micro_batch=micro_batch, seq_len=1, tp=1, cp=1, ep=1, sp=False, recompute=recompute, flash=True, zero3_group=1)
    work = generic_cost(_block(), cfg, load_cluster("dgx-a100")).work_bytes
    out = micro_batch * 1024.0
    assert work - out == pytest.approx(measured_kib * KIB, abs=0.01 * KIB)  # less the gradient, held in the base
    assert work == micro_batch * 5136.0 + 2 * out


def test_the_transient_nets_out_the_input_and_adds_the_operands_and_the_gradient() -> None:
    assert RECOMPUTE_LIVE_OPERANDS == 2
    assert recompute_transient_bytes(5136.0, 1024.0) == 5136.0 - 1024.0 + 2 * 1024.0 + 1024.0
    assert recompute_transient_bytes(32.0, 0.0) == 32.0  # a head: no output crosses


def test_a_block_not_recomputed_stores_all_but_the_input_the_layer_before_saves() -> None:
    """Without recompute the block's input is the previous layer's saved ReLU result (one tensor:
    ``GenericLayer.input_saved_bytes_per_token``), and the end of its forward holds ``y`` and the sum
    beside its saved tensors (measured with torch's tracker on the sweep's CNN, pp 2, ZB-H1,
    micro-batch 4, case d0282 at seed 0: the first stage's peak, its last block's final ReLU, 8 KiB
    over the stored activations; 8.9 % under without them)."""
    block = _block().model_copy(update={"input_saved_bytes_per_token": 1024.0})
    cfg = LocalConfig(micro_batch=4, seq_len=1, tp=1, cp=1, ep=1, sp=False, recompute="none", flash=True, zero3_group=1)
    cost = generic_cost(block, cfg, load_cluster("dgx-a100"))
    assert cost.act_bytes == 4 * (5136.0 - 1024.0)
    assert cost.work_bytes == RECOMPUTE_LIVE_OPERANDS * 4 * 1024.0 == 8 * KIB
    full = replace(cfg, recompute="full")  # recomputed, the checkpoint's input is the layer before's output either way
    assert generic_cost(block, full, load_cluster("dgx-a100")).work_bytes == generic_cost(_block(), full, load_cluster("dgx-a100")).work_bytes
