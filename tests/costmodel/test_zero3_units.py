"""The native runtime's ZeRO 3 unit working set (``costmodel.rank_phases.zero3_units``) and the chunk
input's gradient at the layer-by-layer end of a pipeline stage's backward
(``costmodel.rank_phases.layer_by_layer_end``)."""

from __future__ import annotations

from costmodel.rank_phases import peak_phase, zero3_units
from costmodel.ranks import RankSums
from costmodel.specs import ParallelConfig

# bytes per parameter of the running unit (gathered + bf16 gradient), the next one (prefetched), the
# one back-propagated before (its fp32 reduce-scatter input), and of the running unit's gradients
PARTS = (4.0, 2.0, 4.0, 0.0)
UNIT = 10.0 * 400  # FSDP2_UNIT_BYTES times the largest layer
# the CNN's shape, in backward order: a 400-parameter block, a 300-parameter one, a 100-parameter stem
CURVE = ((0.0, 0.0, 400.0, 300.0, 0.0, 400.0), (0.0, 400.0, 300.0, 100.0, 400.0, 300.0),
         (0.0, 700.0, 100.0, 0.0, 300.0, 100.0))


def _sums(curve: tuple = CURVE, recv: float = 0.0) -> RankSums:
    return RankSums(fwd_s=0.0, bwd_s=0.0, recompute_s=0.0, exposed_s=0.0, hidden_s=0.0, act_bytes=0.0, params=800.0,
                    expert_params=0.0, links={}, work_bytes=0.0, largest_layer_params=400.0, boundary_bytes=recv,
                    recv_bytes=recv, backward_curve=curve)


def test_the_largest_moment_not_the_largest_unit_at_every_part() -> None:
    """The 300-parameter block's moment (its own 4 B, the stem's 2 B prefetched, the 400-parameter
    block's 4 B reduce-scatter input) is the largest, under 10 B times the largest block; the end
    holds the stem's (the chunk's last unit's) reduce-scatter input alone."""
    moment, end = zero3_units(_sums(), PARTS, UNIT, 4.0)
    assert moment == 4 * 300 + 2 * 100 + 4 * 400 < UNIT
    assert end == 4 * 100


def test_without_a_curve_or_parts_the_whole_unit() -> None:
    """No curve (an interleaved rank) or no per-layer parts (no-sync backwards): the unit as given."""
    assert zero3_units(_sums(()), PARTS, UNIT, 4.0) == (UNIT, UNIT)
    assert zero3_units(_sums(), (0.0, 0.0, 0.0, 0.0), UNIT, 4.0) == (UNIT, UNIT)


def test_never_above_the_unit() -> None:
    """A moment priced above the whole unit (more bytes per parameter than it counts) is capped."""
    assert zero3_units(_sums(), (8.0, 8.0, 8.0, 8.0), UNIT, 4.0)[0] == UNIT


def test_the_end_holds_the_chunk_input_gradient() -> None:
    """A last stage with one micro-batch (case d0170 at seed 1): its only backward's end holds every
    gradient, the last unit's reduce-scatter input and the 4 KiB gradient of the received input,
    which ``PipelineStage`` keeps in ``bwd_cache`` until it is sent."""
    cfg = ParallelConfig(pp=2, zero=3, micro_batch=8, global_batch=8, seq_len=16, engine="native")
    with_grad = peak_phase(cfg, _sums(recv=4096.0), 1.0, 0.0, 3200.0, curve=(PARTS, 400.0))
    without = peak_phase(cfg, _sums(), 1.0, 0.0, 3200.0, curve=(PARTS, 400.0))
    assert (with_grad.acts, with_grad.grads, with_grad.unit) == (4096.0, 3200.0, 400.0)
    assert without.acts == 0.0
