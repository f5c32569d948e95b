"""Pipelined ranks' memory terms as ``torch.distributed.pipelining`` runs them: receive buffers per
micro-batch (``costmodel.rank_memory.p2p_buffer_bytes``, ``RankSums.recv_bytes`` / ``send_bytes``),
the last stage's logits kept to its backward (``EngineTerms.pp_keeps_logits``), whole gradients only
where no-sync backwards accumulate them, the interleaved share of gradients
(``costmodel.rank_phases.grad_share``) and an eager final RMSNorm's saved tensors
(``costmodel.layer_other.EAGER_RMSNORM_BYTES``). The tracker-measured cases are in
``tests/planner/runtime/test_memcheck_pipeline.py``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from costmodel.engines import engine_terms
from costmodel.layer_other import norm_cost
from costmodel.local import LocalConfig
from costmodel.rank_memory import _kept_logit_bytes, p2p_buffer_bytes
from costmodel.rank_phases import grad_share
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


@pytest.mark.parametrize(("make", "hf"), [(lambda: torch.nn.RMSNorm(64, eps=1e-5), False), (None, True)])
def test_final_rmsnorm_keeps_what_autograd_saves(make: object, hf: bool) -> None:
    """Saved-tensor hooks on the eager norm in bf16, against ``norm_cost``'s activations (the fp32
    statistics, 4 B per token, are left out: 1/16 of an element per token at h 64)."""
    if hf:
        from transformers.models.llama.modeling_llama import LlamaRMSNorm

        module = LlamaRMSNorm(64)
    else:
        module = make()  # type: ignore[operator]
    module = module.to(torch.bfloat16)
    x = torch.randn(2, 128, 64, dtype=torch.bfloat16, requires_grad=True)
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(x)
    terms = engine_terms(_cfg(pp=1))
    local = LocalConfig(micro_batch=2, seq_len=128, tp=1, cp=1, ep=1, sp=False, recompute="none", flash=True, zero3_group=1, terms=terms)
    act = norm_cost(NormLayer(hidden_size=64, norm="rmsnorm"), local, CLUSTER, transformers_norm=hf).act_bytes
    assert act == pytest.approx(sum(saved.values()), rel=0.05)
    assert act < sum(saved.values())
