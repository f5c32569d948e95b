"""Expert parallelism: each rank of an EP group keeps ``E / ep`` experts, tokens travel by all-to-all.

The EP group is carved out of the data-parallel ranks (Megatron-LM's ``tp-cp-ep-dp-pp`` order,
:mod:`planner.runtime.mesh`): its ``ep`` ranks hold different tokens and different experts. Rank
``r`` of the group keeps experts ``r x E/ep ... (r + 1) x E/ep - 1``: the 3-D expert tensors
(``gate_up_proj`` [E, 2I, H], ``down_proj`` [E, H, I], Hugging Face's ``MixtralExperts`` and its
kin) are sliced along dim 0 (:func:`expert_slices` tells :func:`planner.runtime.init.materialize`
which rows to copy out of the one-process weights). The model's own router still picks the top-k
experts of each token; :class:`ParallelExperts` replaces the experts' forward by the dispatch of
torchtitan's ``TokenDispatcher`` / Megatron-LM's ``MoEAlltoAllTokenDispatcher`` (written here):

1. sort the ``T x k`` token copies by expert (stable), count them per expert;
2. exchange the counts (``all_to_all_single`` of E integers), so each rank knows how many rows it
   receives from each source for each of its experts;
3. ``all_to_all_single`` of the token copies with those variable split sizes (autograd: the
   backward is the reverse all-to-all, :class:`_AllToAll`);
4. group the received rows by local expert, run each expert (SwiGLU as the model's own code:
   ``act(x W_gate) * (x W_up)`` then ``W_down``);
5. the reverse all-to-all brings every row back to its token's rank, where the rows are weighted by
   the router's scores and summed per token (``index_add``).

It is dropless: no capacity factor, nothing padded or dropped, so a step computes exactly what one
process computes (up to fp32 summation order).

Gradients (Megatron-LM's expert-data-parallel reduction): the global loss is the mean of the ``dp``
ranks' local losses, so ``dL/dW_e = (1/dp) sum_j dL_j/dW_e`` over all data-parallel ranks ``j``. The
backward all-to-all already sums the contributions of the EP group's ranks into the expert's owner;
FSDP2 then averages over the expert-data-parallel group (``dp / ep`` ranks holding the same experts,
:func:`planner.runtime.fsdp.apply_fsdp`). That average divides by ``dp / ep``, so the expert weights'
gradients are scaled by ``1 / ep`` in backward (:class:`_ScaleGrad`), giving ``1 / dp`` overall. Under
context parallelism read ``dp x cp`` for ``dp`` throughout: the EP group is carved out of the dp x cp
ranks (:mod:`planner.runtime.mesh`), each holding its own tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import torch
import torch.distributed as dist
from torch import nn

from planner.errors import InputError

EXPERT_TENSORS = ("gate_up_proj", "down_proj")
"""The 3-D expert tensors (transformers 5's fused experts: ``MixtralExperts``, ``Qwen3MoeExperts``, ...)."""


def is_experts(module: nn.Module) -> bool:
    """Whether ``module`` is a fused-experts module: ``num_experts`` and the 3-D :data:`EXPERT_TENSORS`."""
    return (hasattr(module, "num_experts") and all(
        isinstance(getattr(module, n, None), torch.Tensor) and getattr(module, n).dim() == 3 for n in EXPERT_TENSORS))


def _check_layout(path: str, module: nn.Module, ep: int) -> None:
    """InputError unless ``module`` is the layout :class:`ParallelExperts` computes."""
    plain = (not getattr(module, "has_bias", False) and getattr(module, "has_gate", True)
             and not getattr(module, "is_transposed", False) and getattr(module, "is_concatenated", True)
             and not getattr(module, "has_post_expert_norm", False))
    extra = sorted(set(n for n, _ in module.named_parameters()) - set(EXPERT_TENSORS))
    if not plain or extra:
        raise InputError(f"experts {path} are not gate-up / down SwiGLU experts without biases; the native runtime "
                         f"shards only that layout over ep (plan with ep 1)")
    if module.num_experts % ep:
        raise InputError(f"experts {path}: {module.num_experts} experts are not divisible by ep {ep}; plan an ep that divides them")


class _AllToAll(torch.autograd.Function):
    """``all_to_all_single`` with variable splits; backward sends the gradients back the same way."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, send: list[int], recv: list[int], group: Any) -> torch.Tensor:  # type: ignore[override]
        ctx.send, ctx.recv, ctx.group = send, recv, group
        out = x.new_empty((sum(recv), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), output_split_sizes=recv, input_split_sizes=send, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:  # type: ignore[override]
        return _AllToAll.apply(grad, ctx.recv, ctx.send, ctx.group), None, None, None


class _ScaleGrad(torch.autograd.Function):
    """Identity forward, gradient times ``factor`` (the ``1 / ep`` of the module docstring)."""

    @staticmethod
    def forward(ctx: Any, w: torch.Tensor, factor: float) -> torch.Tensor:  # type: ignore[override]
        ctx.factor = factor
        return w.view_as(w)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return grad * ctx.factor, None


@dataclass(frozen=True)
class _Routing:
    """Where this rank's token copies go and what it receives."""

    send: list[int]
    """Rows sent to each EP rank (token copies sorted by expert)."""
    recv: list[int]
    """Rows received from each EP rank."""
    per_expert: list[int]
    """Received rows of each local expert, once grouped by expert."""
    group_order: torch.Tensor | None
    """Received row of each grouped row (None: received rows are already grouped)."""


def _even(total: int, parts: int) -> list[int]:
    return [total // parts + (i < total % parts) for i in range(parts)]


class ParallelExperts(nn.Module):
    """This EP rank's experts of a fused-experts module, with the all-to-all dispatch (module docstring).

    Parameter names stay the model's (``gate_up_proj``, ``down_proj``); their dim 0 holds the local
    experts only."""

    def __init__(self, source: nn.Module, ep: int, ep_rank: int, group: Any) -> None:
        super().__init__()
        self.num_experts = int(source.num_experts)
        self.local = self.num_experts // ep
        self.first = ep_rank * self.local
        self.ep, self.group = ep, group
        self.act_fn = source.act_fn
        for name in EXPERT_TENSORS:
            full = getattr(source, name)
            local = torch.empty((self.local, *full.shape[1:]), dtype=full.dtype, device=full.device)
            setattr(self, name, nn.Parameter(local, requires_grad=full.requires_grad))

    def forward(self, hidden: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor) -> torch.Tensor:
        k = top_k_index.shape[1]
        flat = top_k_index.reshape(-1)
        order = torch.argsort(flat, stable=True)
        token = order // k
        routing = self._route(flat)
        received = _AllToAll.apply(hidden[token], routing.send, routing.recv, self.group)
        grouped = received if routing.group_order is None else received[routing.group_order]
        out = self._experts(grouped, routing.per_expert)
        if routing.group_order is not None:
            out = out[torch.argsort(routing.group_order)]
        back = _AllToAll.apply(out, routing.recv, routing.send, self.group)
        weights = top_k_weights.reshape(-1)[order]
        combined = back * weights[:, None]
        return torch.zeros_like(hidden).index_add(0, token, combined.to(hidden.dtype))

    def _route(self, flat: torch.Tensor) -> _Routing:
        """Exchange the per-expert counts; fake tensors (the memory check) route evenly."""
        from torch._subclasses.fake_tensor import is_fake

        counts = torch.zeros(self.num_experts, dtype=torch.int64, device=flat.device)
        counts.scatter_add_(0, flat, torch.ones_like(flat))
        if is_fake(counts) or dist.get_backend(self.group) == "fake":
            rows = _even(flat.numel(), self.ep)
            return _Routing(rows, rows, _even(flat.numel(), self.local), None)
        incoming = torch.empty_like(counts)
        dist.all_to_all_single(incoming, counts, group=self.group)
        send = counts.view(self.ep, self.local).sum(1).tolist()
        by_source = incoming.view(self.ep, self.local)
        recv = by_source.sum(1).tolist()
        expert_of_row = torch.repeat_interleave(torch.arange(self.local, device=flat.device).repeat(self.ep),
                                                by_source.reshape(-1))
        return _Routing(send, recv, by_source.sum(0).tolist(), torch.argsort(expert_of_row, stable=True))

    def _experts(self, rows: torch.Tensor, per_expert: list[int]) -> torch.Tensor:
        """Each local expert on its rows: ``down(act(gate(x)) * up(x))`` (the model's own SwiGLU)."""
        gate_up = _ScaleGrad.apply(self.gate_up_proj, 1.0 / self.ep)
        down = _ScaleGrad.apply(self.down_proj, 1.0 / self.ep)
        outs = []
        for e, chunk in enumerate(torch.split(rows, per_expert)):
            gate, up = nn.functional.linear(chunk, gate_up[e]).chunk(2, dim=-1)
            outs.append(nn.functional.linear(self.act_fn(gate) * up, down[e]))
        return torch.cat(outs) if outs else rows.new_empty((0, self.down_proj.shape[1]))


def expert_modules(root: nn.Module) -> Iterator[tuple[str, ParallelExperts]]:
    """(path, module) of every :class:`ParallelExperts` under ``root``."""
    for path, module in root.named_modules():
        if isinstance(module, ParallelExperts):
            yield path, module


def apply_expert_parallel(root: nn.Module, paths: list[str], ep: int, ep_rank: int, group: Any) -> int:
    """Replace every fused-experts module under the modules ``paths`` of ``root`` by this rank's
    :class:`ParallelExperts`; the number replaced."""
    replaced = 0
    for base in paths:
        layer = root.get_submodule(base)
        for path, module in list(layer.named_modules()):
            if not path or not is_experts(module):
                continue
            _check_layout(f"{base}.{path}", module, ep)
            parent_path, _, name = path.rpartition(".")
            parent = layer.get_submodule(parent_path) if parent_path else layer
            setattr(parent, name, ParallelExperts(module, ep, ep_rank, group))
            replaced += 1
    return replaced


def shard_experts(stages: list[Any], pmesh: Any) -> None:
    """Keep this rank's experts in every block of the stage modules ``stages`` over ``pmesh``'s EP
    group (:class:`~planner.runtime.mesh.PlanMesh`; a stage without MoE blocks has none)."""
    from planner.runtime.stage import ROOT

    for stage in stages:
        paths = [ROOT + u.path for u in stage.units if u.kind == "block"]
        apply_expert_parallel(stage, paths, pmesh.ep, pmesh.ep_rank(), pmesh.ep_group())


def expert_slices(root: nn.Module, prefix: str = "") -> dict[str, slice]:
    """Names (under ``root``, less ``prefix``) of the local expert tensors and their rows in the full tensor."""
    out = {}
    for path, module in expert_modules(root):
        for name in EXPERT_TENSORS:
            out[f"{path}.{name}".removeprefix(prefix)] = slice(module.first, module.first + module.local)
    return out


def gather_experts(root: nn.Module, params: dict[str, torch.Tensor], prefix: str = "") -> dict[str, torch.Tensor]:
    """``params`` (full over the expert-data-parallel ranks) with each local expert tensor replaced by
    all experts, all-gathered over the EP group (a collective: every rank of the group calls it)."""
    out = dict(params)
    for path, module in expert_modules(root):
        for name in EXPERT_TENSORS:
            key = f"{path}.{name}".removeprefix(prefix)
            parts = [torch.empty_like(out[key]) for _ in range(module.ep)]
            dist.all_gather(parts, out[key].contiguous(), group=module.group)
            out[key] = torch.cat(parts)
    return out

