"""Golden test of what torchtitan's op-level selective checkpointing keeps for a block, eager and
under torch.compile (``costmodel.activations.sac_saved_bytes_per_token``,
``EngineTerms.sac_caches_unread_outputs``), against torch itself: the eager checkpoint's cache
(``torch.utils.checkpoint._CachingTorchDispatchMode``) and the forward graph AOTAutograd's min-cut
partitioner (inductor's decompositions and partitioner, no code generation) hands to backward."""

from __future__ import annotations

import functools

import pytest
import torch
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

from costmodel.activations import block_activation_bytes
from costmodel.engines import engine_terms
from costmodel.layer_transformer import _feeds_residual, _projections
from costmodel.local import LocalConfig
from costmodel.specs import ParallelConfig, TransformerLayer
from planner.runtime import recompute
from planner.runtime.models import Block

B, S = 2, 64
SPEC = TransformerLayer(hidden_size=128, num_heads=4, num_kv_heads=2, head_dim=32, ffn_hidden_size=352, ffn_act="swiglu", norm="rmsnorm")


def _local(compile_: bool) -> LocalConfig:
    terms = engine_terms(ParallelConfig(dp=8, micro_batch=B, global_batch=8 * B, seq_len=S, zero=3, engine="torchtitan", recompute="selective", compile=compile_))
    return LocalConfig(micro_batch=B, seq_len=S, tp=1, cp=1, ep=1, sp=False, recompute="selective", flash=True, zero3_group=8, terms=terms)


def _predicted_per_token(compile_: bool) -> float:
    cfg = _local(compile_)
    widths = [w for _, _, w in _projections(SPEC, cfg)]
    stored, _ = block_activation_bytes(SPEC, cfg, widths, _feeds_residual(SPEC, cfg))
    return stored / cfg.tokens


def _block_and_forward() -> tuple[Block, list, object]:
    torch.manual_seed(0)
    block = Block(SPEC, rotary=True).to(torch.bfloat16)
    caches: list = []

    def contexts():  # noqa: ANN202 - torch's context_fn protocol
        pair = create_selective_checkpoint_contexts(functools.partial(recompute._op_level_policy, {}))
        caches.append(pair[0])
        return pair

    def forward(x: torch.Tensor) -> torch.Tensor:
        return checkpoint(block.forward, x, use_reentrant=False, context_fn=contexts)

    return block, caches, forward


def _eager_stored_per_token() -> float:
    """The block input the checkpoint keeps plus every tensor in its selective cache."""
    _, caches, forward = _block_and_forward()
    x = torch.randn(B, S, SPEC.hidden_size, dtype=torch.bfloat16, requires_grad=True)
    y = forward(x)
    cached = [leaf.val for per_op in caches[-1].storage.values() for entry in per_op.values()
              for leaf in torch.utils._pytree.tree_leaves(entry) if isinstance(getattr(leaf, "val", None), torch.Tensor)]
    assert y.requires_grad and cached
    return (x.nbytes + sum(t.nbytes for t in cached)) / (B * S)


def _compiled_stored_per_token() -> float:
    """What the compiled forward returns for backward beyond the block's output: its saved
    activations (the parameters and buffers it also hands over are not activations)."""
    from functorch.compile import min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.compile_fx import select_decomp_table

    block, _, forward = _block_and_forward()
    params = {tuple(p.shape) for p in [*block.parameters(), *block.buffers()]}
    saved: list[torch.Tensor] = []

    def fw_compiler(gm: torch.fx.GraphModule, _inputs: list) -> torch.fx.GraphModule:
        outputs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        saved.extend(v for n in outputs[1:] if isinstance(v := n.meta.get("val"), torch.Tensor) and (n.op != "placeholder" or tuple(v.shape) not in params))
        return gm

    backend = aot_autograd(fw_compiler=fw_compiler, bw_compiler=lambda gm, _: gm, decompositions=select_decomp_table(),
                           partition_fn=functools.partial(min_cut_rematerialization_partition, compiler="inductor"))
    torch._dynamo.reset()
    x = torch.randn(B, S, SPEC.hidden_size, dtype=torch.bfloat16, requires_grad=True)
    torch.compile(forward, backend=backend, fullgraph=True)(x)
    torch._dynamo.reset()
    return sum(v.numel() * v.element_size() for v in saved) / (B * S)


def test_eager_sac_caches_the_down_projection_output_compile_does_not() -> None:
    """Eager: input 2h, ``q`` 2q, ``v`` 2kv, the FFN's saved up/gate projection 2f, the down
    projection 2h, SDPA's output 2q and fp32 log-sum-exp 4a per token; compiled: the same without the
    down projection's output, which only feeds the residual add."""
    h, q, kv, f, a = 128, 128, 64, 352, 4
    eager, compiled = _predicted_per_token(False), _predicted_per_token(True)
    assert eager == pytest.approx(2 * h + 2 * q + 2 * kv + 2 * f + 2 * h + 2 * q + 4 * a)
    assert eager - compiled == pytest.approx(2 * h)
    assert _eager_stored_per_token() == pytest.approx(eager)
    assert _compiled_stored_per_token() == pytest.approx(compiled)
