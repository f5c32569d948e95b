"""Golden test of the loss's stranded allocator block (``costmodel.memory.stranded_logit_bytes``,
``EngineTerms.loss_strands_logits``) against its source: torchtitan's own loss
(torchtitan/components/loss.py ``cross_entropy_loss``) with ``del pred`` before backward
(torchtitan's trainer), run on CPU with every op's output recorded by a dispatch mode."""

from __future__ import annotations

import weakref

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from costmodel.memory import stranded_logit_bytes
from costmodel.specs import ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from profiles import load_cluster
from tests.costmodel.test_engines import llama


class _Outputs(TorchDispatchMode):
    """Bytes of every tensor an op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        out = func(*args, **(kwargs or {}))
        self.sizes += [t.nbytes for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        return out


def test_loss_backward_buffers_cannot_reuse_the_freed_bf16_logits() -> None:
    """The bf16 logits are gone before backward, and backward allocates fp32 buffers of twice their
    size while the saved fp32 ``log_softmax`` output is still held: two such buffers at once, and
    the caching allocator gives a request only a cached block at least as large."""
    from torchtitan.components.loss import cross_entropy_loss

    tokens, vocab = 64, 1000
    hidden = torch.randn(1, tokens, 32, requires_grad=True)
    pred = (hidden @ torch.randn(32, vocab)).to(torch.bfloat16)
    gone = weakref.ref(pred)
    loss = cross_entropy_loss(pred, torch.randint(vocab, (1, tokens)))
    bf16_bytes = pred.nbytes
    del pred
    assert gone() is None  # torchtitan's ``del pred`` frees the logits: nothing in the graph keeps them
    with _Outputs() as backward:
        loss.backward()
    fp32 = [s for s in backward.sizes if s == 2 * bf16_bytes]
    assert len(fp32) >= 2 and max(backward.sizes) == 2 * bf16_bytes


def test_stranded_block_is_the_bf16_logits_on_the_head_rank_of_torchtitan_only() -> None:
    model, h100 = llama(), load_cluster("dgx-h100")
    tokens, vocab = 2 * 8192, 128256
    assert stranded_logit_bytes(model, tokens, 1, 0, 1) == 2 * tokens * vocab
    assert stranded_logit_bytes(model, tokens, 4, 1, 2) == 2 * tokens * vocab / 4
    assert stranded_logit_bytes(model, tokens, 1, 0, 2) == 0.0
    base = dict(dp=8, micro_batch=2, global_batch=16, seq_len=8192, zero=3, recompute="selective")
    for engine, expected in (("torchtitan", 2 * tokens * vocab), ("megatron", 0.0)):
        est = estimate_step(build_cost_table(model, h100), ParallelConfig(engine=engine, **base))
        assert est.rank_memory_parts_gib(0)[1]["allocator_loss_block"] * 2**30 == pytest.approx(expected)
