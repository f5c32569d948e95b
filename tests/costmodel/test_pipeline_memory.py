"""Pipelined ranks' memory terms as ``torch.distributed.pipelining`` runs them: receive buffers per
micro-batch (``costmodel.rank_memory.p2p_buffer_bytes``, ``RankSums.recv_bytes`` / ``send_bytes``),
the last stage's logits kept to its backward (``EngineTerms.pp_keeps_logits``), whole gradients only
where no-sync backwards accumulate them, the interleaved share of gradients
(``costmodel.rank_phases.grad_share``), the chunks no-sync backwards keep gathered
(``costmodel.rank_phases.nosync_chunks``), a GPipe last stage's held losses at each phase and an eager final RMSNorm's saved tensors
(``costmodel.layer_other.EAGER_RMSNORM_BYTES``). The tracker-measured cases are in
``tests/planner/runtime/test_memcheck_pipeline.py``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from costmodel.engines import engine_terms
from costmodel.layer_other import norm_cost
from costmodel.local import LocalConfig
from costmodel.rank_memory import _kept_logit_bytes, p2p_buffer_bytes, rank_allocated_bytes
from costmodel.rank_phases import grad_share, nosync_chunks, peak_phase
from costmodel.ranks import RankSums
from costmodel.specs import NormLayer, ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

CLUSTER = resolve_cluster_arg("dgx-h100")
TABLE = build_cost_table(resolve_model_arg("llama3.1-8b"), CLUSTER)
HIDDEN = 4096


def _cfg(**fields: object) -> ParallelConfig:
    base = dict(dp=1, tp=1, pp=4, micro_batch=1, global_batch=8, seq_len=1024, engine="native", zero=1)
    return ParallelConfig(**{**base, **fields})


def test_buffers_are_one_per_micro_batch_each_way() -> None:
    assert p2p_buffer_bytes(_cfg(), 10.0, 3.0) == 8 * 13.0
    assert p2p_buffer_bytes(_cfg(pp=1), 10.0, 3.0) == 0.0


def test_first_stage_only_sends_last_stage_only_receives() -> None:
    cfg = _cfg()
    ranks = estimate_step(TABLE, cfg).ranks
    boundary = 1024 * HIDDEN * 2  # one micro-batch's bf16 hidden state
    first, middle, last = ranks.rank(0), ranks.rank(1), ranks.rank(3)
    assert (first.recv_bytes, first.send_bytes) == (0.0, boundary)
    assert (middle.recv_bytes, middle.send_bytes) == (boundary, boundary)
    assert (last.recv_bytes, last.send_bytes) == (boundary, 0.0)


def test_pipelined_last_stage_keeps_the_bf16_logits_in_its_loss_transient() -> None:
    piped = estimate_step(TABLE, _cfg()).ranks.rank(3).work_bytes
    whole = estimate_step(TABLE, _cfg(pp=1)).ranks.rank(0).work_bytes
    vocab = 128_256
    assert piped - whole == pytest.approx(2 * 1024 * vocab, rel=1e-9)


def test_only_the_last_stage_holds_its_logits_through_its_backward() -> None:
    """``PipelineStage.backward_one_chunk`` keeps the popped stage output to the backward's end
    (``costmodel.rank_memory._kept_logit_bytes``): 2 B per logit on the last stage, under TP its share."""
    vocab, cfg = 128_256, _cfg()
    terms = engine_terms(cfg)
    assert _kept_logit_bytes(TABLE, cfg, terms, 3) == 2 * 1024 * vocab
    assert _kept_logit_bytes(TABLE, cfg, terms, 2) == 0.0
    tp = _cfg(tp=2)
    assert _kept_logit_bytes(TABLE, tp, engine_terms(tp), 3) == 1024 * vocab
    assert _kept_logit_bytes(TABLE, _cfg(pp=1), engine_terms(_cfg(pp=1)), 0) == 0.0


def test_unsharded_gradients_only_where_no_sync_backwards_accumulate() -> None:
    assert engine_terms(_cfg(micro_batch=1)).pp_unsharded_grads
    assert not engine_terms(_cfg(micro_batch=8)).pp_unsharded_grads  # one micro-batch: its backward syncs


def test_interleaved_forward_meets_the_gradients_of_chunks_that_ran_a_backward() -> None:
    cfg = _cfg(pp=2, vpp=2, schedule="interleaved-1f1b", global_batch=2)
    sums = SimpleNamespace(chunk_params=(1.0, 3.0))
    assert grad_share(cfg, sums, 0) == 0.0  # every forward in the warm-up
    assert grad_share(cfg, sums, 1) == 0.75  # one backward, on the last chunk
    assert grad_share(cfg, sums, 3) == 1.0  # (v - 1) pp + 1 backwards: both chunks
    assert grad_share(_cfg(pp=2), sums, 1) == 1.0


def test_no_sync_backwards_keep_a_chunk_gathered_from_its_first_backward_to_its_last() -> None:
    sums = SimpleNamespace(chunk_params=(1.0, 3.0))
    two = _cfg(pp=2, vpp=2, schedule="interleaved-1f1b", global_batch=2)  # two micro-batches
    assert nosync_chunks(two, sums, 0) == (0.0, 0.0, False)  # nothing gathered before the first backward
    assert nosync_chunks(two, sums, 1) == (0.75, 0.0, True)  # the last chunk, micro-batch 0 run
    assert nosync_chunks(two, sums, 2) == (0.0, 0.75, False)  # its last micro-batch reduced and resharded it
    four = _cfg(pp=2, vpp=2, schedule="interleaved-1f1b", global_batch=4)
    assert nosync_chunks(four, sums, 3) == (1.0, 0.0, True)  # both chunks, none at its last micro-batch
    assert nosync_chunks(_cfg(pp=2, global_batch=4), sums, 1) == (1.0, 0.0, True)  # one chunk: after its first


def test_a_zero3_chunk_gathered_only_between_its_first_and_last_backward() -> None:
    """The native runtime's interleaved ZeRO 3 first rank with as many micro-batches as stages (pp 2,
    v 2, two micro-batches): a chunk's last backward reshards it before the other chunk's first, so
    no phase holds both chunks gathered (6 B per parameter of the rank), and one phase a chunk or the
    running units (4 B of the largest layer)."""
    cfg = _cfg(pp=2, vpp=2, schedule="interleaved-1f1b", zero=3, global_batch=2, seq_len=256)
    sums = estimate_step(TABLE, cfg).ranks
    first = sums.types[sums.first_rank.index(0)]
    buffers = rank_allocated_bytes(TABLE, cfg, first, 0)["buffers"]
    assert 4 * first.largest_layer_params <= buffers < 6 * first.params


def test_a_gpipe_last_stage_holds_one_loss_fewer_beside_the_next_loss_backward() -> None:
    """B of ``peak_phase`` (the end of the first backward, the next micro-batch's loss transient
    beside it) takes the held losses of one micro-batch fewer than A (``losses``)."""
    sums = RankSums(fwd_s=0.0, bwd_s=0.0, recompute_s=0.0, exposed_s=0.0, hidden_s=0.0, act_bytes=2.0, params=100.0,
                    expert_params=0.0, links={}, work_bytes=36.0, largest_layer_params=100.0, boundary_bytes=0.0)
    cfg = _cfg(pp=2, schedule="gpipe", global_batch=2)
    both = peak_phase(cfg, sums, 2.0, 4.0, 50.0, losses=(12.0, 0.0))
    assert both.acts == 4.0 - 2.0 + 36.0  # B: the first micro-batch freed, the next loss, no other loss held
    assert peak_phase(cfg, sums, 2.0, 4.0, 50.0, losses=(12.0, 12.0)).acts == both.acts + 12.0
