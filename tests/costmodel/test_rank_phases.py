"""The layer-by-layer end of a pipeline stage's backward (``costmodel.rank_phases.peak_phase``): the
next micro-batch's backward keeps that micro-batch's own stage output held beside it, as the first
backward does (``PipelineStage.backward_one_chunk`` pops it from ``fwd_cache`` into a local that lives
until the backward returns, torch 2.13 pipelining/stage.py)."""

from __future__ import annotations

from costmodel.rank_phases import peak_phase
from costmodel.ranks import RankSums
from costmodel.specs import ParallelConfig

ACT, SENT, WORK, GRADS = 16.0, 2.0, 80.0, 50.0


def _sums() -> RankSums:
    """A stage of one recomputed block (100 parameters), its backward curve one point: the block's
    recomputed transient, its stored activations among it, no gradient yet."""
    return RankSums(fwd_s=0.0, bwd_s=0.0, recompute_s=0.0, exposed_s=0.0, hidden_s=0.0, act_bytes=ACT, params=100.0,
                    expert_params=0.0, links={}, work_bytes=WORK, largest_layer_params=100.0, boundary_bytes=SENT,
                    body_work_bytes=WORK, largest_layer_act_bytes=ACT, send_bytes=SENT, recv_bytes=SENT,
                    backward_curve=((WORK, 0.0, 100.0, 0.0, 0.0, 100.0),), work_stored_bytes=(ACT, ACT))


def test_the_next_backward_holds_its_own_stage_output() -> None:
    """A middle stage of pp 4 with two micro-batches (1F1B: both in flight, case d0198 of the
    differential sweep, its second stage): the peak is the second backward's recomputed block beside
    every gradient, with that micro-batch's 2-byte output still held; the first micro-batch's
    activations and output are freed by then. Measured with torch's tracker on d0198's second stage:
    18.5 KiB of forward activations at that moment, its stored 16.5 and the 2.0 KiB output."""
    cfg = ParallelConfig(pp=4, micro_batch=1, global_batch=2, seq_len=16, engine="native")
    held = 2 * (ACT + SENT)
    phase = peak_phase(cfg, _sums(), 2.0, held, GRADS, curve=((0.0, 0.0, 0.0, 0.0), 0.0))
    assert (phase.acts, phase.grads) == (SENT + WORK, GRADS)


def test_one_micro_batch_has_no_next_backward() -> None:
    """With one micro-batch the layer-by-layer end is the only backward's, its output held (the base)."""
    cfg = ParallelConfig(pp=4, micro_batch=1, global_batch=1, seq_len=16, engine="native")
    phase = peak_phase(cfg, _sums(), 1.0, ACT + SENT, GRADS, curve=((0.0, 0.0, 0.0, 0.0), 0.0))
    assert phase.acts == SENT + WORK and phase.grads == 0.0
