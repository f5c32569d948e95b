"""What FSDP2 holds at the end of a backward without pipelining (``costmodel.rank_memory._backward_end_bytes``):
each unit's fp32 reduce output beside the gradients once a micro-batch adds into an earlier one's,
and, under ZeRO 0-2, the gathered bf16 parameters no longer held (also with one micro-batch, and in a
pipelined stage's only backward), with their bytes per parameter back-propagated; native engine only."""

from __future__ import annotations

from types import SimpleNamespace

from costmodel.engines import engine_terms
from costmodel.rank_memory import FSDP2_LOW_ZERO_UNIT_BYTES, FSDP2_UNIT_BYTES, _backward_end_bytes
from costmodel.specs import ParallelConfig

PARAMS, LARGEST = 1e6, 1e5
SUMS = SimpleNamespace(params=PARAMS, largest_layer_params=LARGEST, backward_curve=())


def _cfg(zero: int, dp: int = 1, micro_batch: int = 1, pp: int = 1, engine: str = "native") -> ParallelConfig:
    return ParallelConfig(dp=dp, pp=pp, zero=zero, micro_batch=micro_batch, global_batch=8 * dp, seq_len=1024, engine=engine)


def _end(cfg: ParallelConfig, sharded_grads: float) -> tuple[float, float, float, float]:
    return _backward_end_bytes(cfg, SUMS, engine_terms(cfg), sharded_grads)  # type: ignore[arg-type]


def test_zero3_keeps_every_reduce_output_beside_the_gradients() -> None:
    """All but the running unit's (the largest layer's, a tenth here)."""
    cfg = _cfg(3, dp=2)
    assert _end(cfg, 4 * PARAMS / 2) == (0.9 * 4 * PARAMS / 2, 0.0, 4 / 2, 0.0)


def test_zero0_frees_the_gathered_parameters_but_the_running_unit() -> None:
    """Without a backward curve the unit back-propagated last is priced as the largest."""
    cfg = _cfg(0)
    kept = FSDP2_UNIT_BYTES - FSDP2_LOW_ZERO_UNIT_BYTES  # the reduce-scatter input: the unit's buffer
    assert _end(cfg, 4 * PARAMS) == (0.9 * 4 * PARAMS, 2 * PARAMS - kept * LARGEST, 4.0, 2.0)


def test_the_last_unit_is_the_curves_last_point() -> None:
    """The layer a backward runs last is the chunk's first: the curve's point with the most parameters done."""
    sums = SimpleNamespace(params=PARAMS, largest_layer_params=LARGEST, backward_curve=((5.0, 0.0, LARGEST, 0.0, 0.0), (1.0, PARAMS - 10.0, 10.0, 0.0, 0.0)))
    cfg = _cfg(0)
    kept = FSDP2_UNIT_BYTES - FSDP2_LOW_ZERO_UNIT_BYTES
    assert _backward_end_bytes(cfg, sums, engine_terms(cfg), 4 * PARAMS)[1] == 2 * PARAMS - kept * 10.0  # type: ignore[arg-type]


def test_the_freed_parameters_may_outweigh_the_reduce_outputs() -> None:
    """ZeRO 2 over 8 shards: 0.5 B of reduce output per parameter against 2 B of bf16 parameters, both priced."""
    retained, freed, kept_rate, freed_rate = _end(_cfg(2, dp=8), 4 * PARAMS / 8)
    assert (kept_rate, freed_rate) == (0.5, 2.0) and freed > retained > 0


def test_one_micro_batch_frees_the_parameters_but_keeps_no_reduce_output() -> None:
    """One micro-batch: nothing to add into; with pipelining its only backward reshards as it goes."""
    assert _end(_cfg(0, micro_batch=8), 4 * PARAMS)[0::2] == (0.0, 0.0)
    assert _end(_cfg(0, micro_batch=8), 4 * PARAMS)[3] == 2.0
    assert _end(_cfg(2, pp=2, micro_batch=8), 4 * PARAMS)[3] == 2.0
    assert _end(_cfg(3, micro_batch=8), 4 * PARAMS) == (0.0, 0.0, 0.0, 0.0)  # ZeRO 3: resharded after forward anyway


def test_nothing_under_pipelining_with_more_micro_batches_or_on_other_engines() -> None:
    assert _end(_cfg(3, pp=2), 4 * PARAMS) == (0.0, 0.0, 0.0, 0.0)  # the stage reduces once, after the last
    assert _end(_cfg(3, engine="torchtitan"), 4 * PARAMS) == (0.0, 0.0, 0.0, 0.0)  # 1-D FSDP: no all-reduce state
