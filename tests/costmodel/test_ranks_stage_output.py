"""A recomputed traced layer that ends a pipeline chunk keeps its output among its stored activations,
the very tensor ``PipelineStage`` keeps in ``fwd_cache`` (``costmodel.ranks.keeps_output``,
``RankSums.kept_send_bytes``): the in-flight micro-batches hold it once, and a backward's own stage
output stays held through it. The tracker-measured cases are the differential sweep's CNN (d0080, d0138)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from costmodel.rank_memory import _held_act_bytes
from costmodel.rank_phases import peak_phase
from costmodel.specs import GenericLayer, ModelSpec, ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg

_BLOCK = dict(params=1184, fwd_flops_per_token=147456.0, fwd_mem_bytes_per_token=11344.0,
              activation_bytes_per_token=5136.0, output_bytes_per_token=1024.0, selective_saved_bytes_per_token=0.0)
SPEC = ModelSpec(name="cnn-like", tokens_per_sample=1, layers=(
    GenericLayer(name="stem", params=232, fwd_flops_per_token=27648.0, activation_bytes_per_token=2440.0, output_bytes_per_token=1024.0),
    GenericLayer(name="block1", **_BLOCK), GenericLayer(name="block2", **_BLOCK),
    GenericLayer(name="head", params=170, fwd_flops_per_token=320.0, activation_bytes_per_token=32.0, tp_mode="column"),
))
TABLE = build_cost_table(SPEC, resolve_cluster_arg("dgx-a100"))
OUT = 4 * 1024.0  # one micro-batch of 4 images' block output


def _cfg(recompute: str) -> ParallelConfig:
    return ParallelConfig(dp=1, tp=1, pp=2, micro_batch=4, global_batch=16, seq_len=1, engine="native", zero=1,
                          recompute=recompute, schedule="gpipe", stage_layers=(2, 2))


@pytest.mark.parametrize("recompute", ["full", "selective"])
def test_a_recomputed_chunk_end_keeps_the_output_it_sends(recompute: str) -> None:
    first = estimate_step(TABLE, _cfg(recompute)).ranks.rank(0)
    assert first.send_bytes == OUT and first.kept_send_bytes == OUT
    cfg = _cfg(recompute)
    assert _held_act_bytes(cfg, first, 0, 4.0) == 4 * first.act_bytes  # the sent output counted once, as block1's


def test_without_recompute_the_sent_output_is_held_beside_the_activations() -> None:
    first = estimate_step(TABLE, _cfg("none")).ranks.rank(0)
    assert first.kept_send_bytes == 0.0
    assert _held_act_bytes(_cfg("none"), first, 0, 4.0) == 4 * (first.act_bytes + OUT)


def test_a_block_that_saves_its_output_sends_the_tensor_it_holds() -> None:
    """Not recomputed, a CNN block's final ReLU saves its result (``GenericLayer.saves_output``), the
    tensor the stage sends: held once (measured with torch's tracker on the sweep's CNN, pp 2, GPipe,
    case d0014 at seed 1: 10.41 KiB per micro-batch on the first stage, its 1 KiB output among them)."""
    saving = SPEC.model_copy(update={"layers": tuple(x.model_copy(update={"saves_output": x.name != "head"}) for x in SPEC.layers)})
    first = estimate_step(build_cost_table(saving, resolve_cluster_arg("dgx-a100")), _cfg("none")).ranks.rank(0)
    assert first.kept_send_bytes == OUT
    assert _held_act_bytes(_cfg("none"), first, 0, 4.0) == 4 * first.act_bytes


def test_the_last_stage_sends_nothing() -> None:
    assert estimate_step(TABLE, _cfg("full")).ranks.rank(1).kept_send_bytes == 0.0


def test_a_backward_holds_its_own_stage_output_where_its_last_layer_counted_it() -> None:
    """The end of a backward layer by layer (``costmodel.rank_phases.peak_phase``): the running
    micro-batch's stage output, which its last layer counted, stays in ``fwd_cache`` through the
    backward (measured on the sweep's CNN, pp 4, GPipe, case d0138: 2 KiB per micro-batch of 2)."""
    cfg = _cfg("full")
    t = estimate_step(TABLE, cfg).ranks.rank(0)
    uncounted = replace(t, send_bytes=0.0, kept_send_bytes=0.0)  # the same held activations, no stage output kept
    held = _held_act_bytes(cfg, t, 0, 4.0)
    assert held == _held_act_bytes(cfg, uncounted, 0, 4.0)
    curve = ((0.0, 0.0, 0.0, 0.0), 0.0)
    grads = 1e6  # the next backward's moments, beside every gradient, are the peak
    kept = peak_phase(cfg, t, 4.0, held, grads, curve=curve)
    assert kept.grads == grads
    assert kept.acts - peak_phase(cfg, uncounted, 4.0, held, grads, curve=curve).acts == pytest.approx(OUT)
