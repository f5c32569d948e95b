"""What FSDP2 holds at the end of a backward without pipelining (``costmodel.rank_memory._backward_end_bytes``):
each unit's fp32 reduce output beside the gradients once a micro-batch adds into an earlier one's,
and, under ZeRO 0-2, the gathered bf16 parameters no longer held; both or neither, native engine only."""

from __future__ import annotations

from types import SimpleNamespace

from costmodel.engines import engine_terms
from costmodel.rank_memory import FSDP2_LOW_ZERO_UNIT_BYTES, FSDP2_UNIT_BYTES, _backward_end_bytes
from costmodel.specs import ParallelConfig

PARAMS, LARGEST = 1e6, 1e5
SUMS = SimpleNamespace(params=PARAMS, largest_layer_params=LARGEST)


def _cfg(zero: int, dp: int = 1, micro_batch: int = 1, pp: int = 1, engine: str = "native") -> ParallelConfig:
    return ParallelConfig(dp=dp, pp=pp, zero=zero, micro_batch=micro_batch, global_batch=8 * dp, seq_len=1024, engine=engine)


def _end(cfg: ParallelConfig, sharded_grads: float) -> tuple[float, float]:
    return _backward_end_bytes(cfg, SUMS, engine_terms(cfg), sharded_grads)  # type: ignore[arg-type]


def test_zero3_keeps_every_reduce_output_beside_the_gradients() -> None:
    """All but the running unit's (the largest layer's, a tenth here)."""
    cfg = _cfg(3, dp=2)
    assert _end(cfg, 4 * PARAMS / 2) == (0.9 * 4 * PARAMS / 2, 0.0)


def test_zero0_frees_the_gathered_parameters_but_the_running_unit() -> None:
    cfg = _cfg(0)
    kept = FSDP2_UNIT_BYTES - FSDP2_LOW_ZERO_UNIT_BYTES  # the reduce-scatter input: the unit's buffer
    assert _end(cfg, 4 * PARAMS) == (0.9 * 4 * PARAMS, 2 * PARAMS - kept * LARGEST)


def test_nothing_where_the_freed_parameters_outweigh_the_reduce_outputs() -> None:
    """ZeRO 2 over 8 shards: 0.5 B of reduce output per parameter against 2 B of bf16 parameters."""
    assert _end(_cfg(2, dp=8), 4 * PARAMS / 8) == (0.0, 0.0)


def test_nothing_with_one_micro_batch_under_pipelining_or_on_other_engines() -> None:
    assert _end(_cfg(3, micro_batch=8), 4 * PARAMS) == (0.0, 0.0)  # one micro-batch: nothing to add into
    assert _end(_cfg(3, pp=2), 4 * PARAMS) == (0.0, 0.0)  # the stage reduces once, after the last
    assert _end(_cfg(3, engine="torchtitan"), 4 * PARAMS) == (0.0, 0.0)  # 1-D FSDP: no all-reduce state
