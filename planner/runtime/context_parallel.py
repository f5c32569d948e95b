"""Context parallelism: every attention call's sequence sharded over the plan's ``cp`` ranks.

Layout (load-balanced causal sharding, Megatron-LM's ``get_batch_on_this_cp_rank`` and torchtitan's
head-tail load balancer, ``_HeadTailLoadBalancer`` in torch/distributed/tensor/experimental/
_context_parallel): the sequence is cut into ``2 cp`` equal chunks and cp rank ``i`` holds chunks
``i`` and ``2 cp - 1 - i``, so that every rank has the same share of the causal mask's work. The
runtime shards each micro-batch's tokens and labels that way (:func:`shard_sequence`) and every
position-dependent table follows its tokens (:func:`local_positions`: the rotary angles of the
runtime's own decoder and of Hugging Face decoders, learned position tables).

Attention (:func:`cp_attention`), one of two variants (:func:`variant`), chosen by the device:

- ``torch`` on CUDA: torch's ``context_parallel`` (``torch.distributed.tensor.experimental``), ring
  attention over SDPA's flash / efficient / cuDNN kernels, with its ``allgather`` K/V rotation
  (``set_rotate_method``, torch's and torchtitan's default: each rank's K/V gathered once, attended
  block by block; Liu et al. 2023, Ring Attention, for the blockwise softmax merge). Given the
  full-length position ids it shards them with its own head-tail balancer, which must give this
  rank's :func:`local_positions` (checked).
- ``allgather`` elsewhere (CPU and gloo, where torch has no ring kernels): every SDPA call
  all-gathers K and V over the cp group (autograd: the backward reduce-scatters their gradients)
  and attends the local query chunks to the whole sequence with the causal mask of their global
  positions; exact, the variant Llama 3's training used for context parallelism (Llama Team 2024,
  "The Llama 3 Herd of Models", section 3.3.2). :func:`allgather_sdpa` replaces
  ``scaled_dot_product_attention`` while the step, backward included, runs (as torch's own CP
  dispatcher does),
  so any module calling causal SDPA (the runtime's decoder, Hugging Face's ``sdpa`` attention, a
  traced custom module) is covered.

Gradients: each rank's loss is the mean over its equal share of the tokens, so the mean over the cp
ranks is the sequence's mean; FSDP2 shards and averages over the ``dp x cp`` ranks
(:meth:`planner.runtime.mesh.PlanMesh.dp_mesh`), experts under expert parallelism over their
expert-data-parallel group, which spans dp x cp too (:mod:`planner.runtime.expert_parallel`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch
import torch.distributed as dist
import torch.nn.functional as F

from planner.errors import InputError

VARIANTS = ("torch", "allgather")
"""Both gather every rank's K/V over the cp group; the cost model prices that collective and the
gathered K/V (``EngineTerms.cp_all_gather`` of the native engine, ``costmodel.engines``)."""


def variant(device_type: str) -> str:
    """The attention variant this device runs: ``torch`` (torch's CUDA ring kernels) or ``allgather``."""
    return "torch" if device_type == "cuda" else "allgather"


def describe(cp: int, device_type: str) -> str:
    """The run record's line on how attention ran under context parallelism."""
    how = ("torch's context_parallel ring attention (allgather K/V rotation)" if variant(device_type) == "torch"
           else "all-gather-KV attention (K/V gathered over the cp group, causal mask of the global positions)")
    return f"context parallelism cp {cp}: chunks i and 2cp-1-i per rank, {how}"


def check_context_parallel(cp: int, seq_len: int, tp: int, sp: bool, tokens: bool) -> None:
    """InputError when ``cp > 1`` cannot shard this plan's sequence: a model without a token sequence,
    a sequence that is not ``2 cp`` equal chunks, or a local sequence that sequence parallelism cannot
    cut over tp (``planner.estimation.config_checks`` refuses such plans first)."""
    if cp <= 1:
        return
    if not tokens:
        raise InputError(f"context parallelism (cp {cp}) shards a token sequence; this model reads none: plan with --cp 1")
    if seq_len % (2 * cp):
        raise InputError(f"context parallelism (cp {cp}) cuts the sequence into {2 * cp} chunks; seq {seq_len} is not a multiple of {2 * cp}")
    if sp and tp > 1 and (seq_len // cp) % tp:
        raise InputError(f"seq {seq_len} / cp {cp} = {seq_len // cp} tokens are not divisible by tp {tp} under sequence parallelism")


def shard_positions(stages: list[Any], cp_shard: tuple[int, int]) -> None:
    """Every position-dependent module of ``stages`` follows this cp rank's tokens: the stage's own
    rotary / position-table calls and the runtime decoder's modules, each carrying a ``cp_shard``
    (cp, cp rank) attribute."""
    for stage in stages:
        for module in stage.modules():
            if hasattr(module, "cp_shard"):
                module.cp_shard = cp_shard


def chunk_ids(cp: int, rank: int) -> tuple[int, int]:
    """The two sequence chunks (of ``2 cp``) cp rank ``rank`` holds."""
    return rank, 2 * cp - 1 - rank


def shard_sequence(t: torch.Tensor, cp: int, rank: int, dim: int = 1) -> torch.Tensor:
    """This cp rank's chunks of ``t`` along ``dim`` (its two load-balanced chunks, concatenated)."""
    if cp == 1:
        return t
    chunks = t.chunk(2 * cp, dim)
    first, second = chunk_ids(cp, rank)
    return torch.cat([chunks[first], chunks[second]], dim).contiguous()


def local_positions(local_len: int, cp: int, rank: int, device: torch.device | str) -> torch.Tensor:
    """Global positions of this cp rank's ``local_len`` tokens (0 .. local_len - 1 without cp)."""
    if cp == 1:
        return torch.arange(local_len, device=device)
    half = local_len // 2
    first, second = chunk_ids(cp, rank)
    return torch.cat([torch.arange(first * half, (first + 1) * half, device=device),
                      torch.arange(second * half, (second + 1) * half, device=device)])


class _GatherSeq(torch.autograd.Function):
    """All-gather along the sequence dimension (2) of (batch, heads, seq, dim); backward: the sum of
    every rank's gradient for this rank's rows (a reduce-scatter; all-reduce then slice on gloo,
    which has no reduce-scatter)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:  # type: ignore[override]
        ctx.group, ctx.rank, ctx.size = group, dist.get_rank(group), dist.get_world_size(group)
        parts = [torch.empty_like(x) for _ in range(ctx.size)]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, 2)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        grad = grad.contiguous()
        if dist.get_backend(ctx.group) == "nccl":
            out = torch.empty_like(grad.chunk(ctx.size, 2)[0])
            dist.reduce_scatter(out, [c.contiguous() for c in grad.chunk(ctx.size, 2)], group=ctx.group)
            return out, None
        dist.all_reduce(grad, group=ctx.group)
        return grad.chunk(ctx.size, 2)[ctx.rank].contiguous(), None


def allgather_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: Any, cp: int, rank: int,
                        scale: float | None = None, enable_gqa: bool = False, sdpa: Callable[..., torch.Tensor] | None = None,
                        exact: bool = True) -> torch.Tensor:
    """Causal attention of the local queries against the cp group's gathered K and V (module docstring),
    through ``sdpa`` (torch's SDPA by default). ``exact`` False (the memory check, on fake tensors): no
    position mask, so that SDPA takes the flash kernel a GPU runs (the same saved tensors) rather than
    the math path a CPU takes for masked attention."""
    sdpa = sdpa or F.scaled_dot_product_attention
    full_k, full_v = _GatherSeq.apply(k, group), _GatherSeq.apply(v, group)
    if not exact:
        return sdpa(q, full_k, full_v, scale=scale, enable_gqa=enable_gqa)
    local = q.shape[2]
    pos_q = local_positions(local, cp, rank, q.device)
    pos_k = torch.cat([local_positions(local, cp, r, q.device) for r in range(cp)])
    mask = pos_k.unsqueeze(0) <= pos_q.unsqueeze(1)
    return sdpa(q, full_k, full_v, attn_mask=mask, scale=scale, enable_gqa=enable_gqa)


_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


@contextlib.contextmanager
def allgather_sdpa(group: Any, cp: int, rank: int, exact: bool = True) -> Iterator[None]:
    """While active, ``torch.nn.functional.scaled_dot_product_attention`` is :func:`allgather_attention`
    over the cp group for causal calls without a mask (torch's own CP dispatcher patches the function
    the same way, ``_DispatchMode.MONKEY_PATCH``). A patch rather than a ``TorchFunctionMode``: a mode is
    off while it handles ``Tensor.backward``, so the forward that checkpointing recomputes inside
    backward would miss it."""
    previous = F.scaled_dot_product_attention

    def sharded(*args: Any, **kwargs: Any) -> torch.Tensor:
        call = dict(zip(_SDPA_ARGS, args), **kwargs)
        if call.get("attn_mask") is not None or not call.get("is_causal") or call.get("dropout_p", 0.0):
            raise InputError("context parallelism shards causal attention without a mask or dropout; this model's "
                             "attention passes a mask, is not causal or has dropout: plan with --cp 1")
        return allgather_attention(call["query"], call["key"], call["value"], group, cp, rank, call.get("scale"),
                                   bool(call.get("enable_gqa", False)), previous, exact)

    F.scaled_dot_product_attention = sharded
    try:
        yield
    finally:
        F.scaled_dot_product_attention = previous


@contextlib.contextmanager
def cp_attention(mesh: Any, cp: int, rank: int, seq_len: int, device: torch.device) -> Iterator[None]:
    """The context in which a step's forward and backward run with its attention sharded over ``mesh``
    (the cp dimension of the plan's mesh): torch's ring attention on CUDA, the all-gather variant elsewhere."""
    if cp == 1:
        yield
        return
    if variant(device.type) == "allgather":
        with allgather_sdpa(mesh.get_group(), cp, rank):
            yield
        return
    from torch.distributed.tensor.experimental import context_parallel
    from torch.distributed.tensor.experimental._attention import set_rotate_method

    set_rotate_method("allgather")
    positions = torch.arange(seq_len, device=device)
    with context_parallel(mesh, buffers=[positions], buffer_seq_dims=[0], no_restore_buffers={positions}):
        if not torch.equal(positions, local_positions(seq_len // cp, cp, rank, device)):
            raise InputError("torch's context_parallel sharded the sequence other than chunks i and 2cp-1-i; "
                             "this torch's load balancer differs from the runtime's layout")
        yield

