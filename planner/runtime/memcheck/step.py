"""One training step of one pipeline rank under torch's FSDP memory tracker, on fake tensors.

The step is what the plan's schedule makes this rank do, in the order that sets its memory peak:

- without pipelining, one micro-batch forward and backward, and a second one when the step has
  several (``planner.runtime.apply.Runtime`` runs the micro-batches one after the other; each frees
  its activations before the next, and from the second on they meet the gradients accumulated so
  far), then AdamW;
- with pipelining, the forwards the schedule runs before this rank's first backward, the first
  backward, then (when micro-batches remain) the steady state's backward / forward pairs until
  every local chunk has run a backward (:func:`steady_pairs`): each steady forward again holds the
  full warm-up's micro-batches, now beside the gradients of every chunk that has run a backward, and
  from the last of these pairs on the rank's memory repeats pair by pair (an interleaved rank's
  first backward accumulates only its last chunk's gradients, so one pair would miss the others'),
  then the remaining backwards in the schedule's order, as ``torch.distributed.pipelining`` does it: GPipe holds all
  ``m`` micro-batches; 1F1B and ZB-H1 ``min(pp - r, m)`` (Narayanan et al. 2021 §2.2.1);
  interleaved 1F1B the warm-up of Megatron-LM's ``schedules.py``, ``2 (pp - r - 1) + (v - 1) pp``
  chunk forwards plus one, forward chunk ``(i // pp) mod v``, backward chunk ``v - 1 - (j // pp) mod v``.
  A chunk's backwards before its last micro-batch's run as ``PipelineStage.backward_maybe_with_nosync``
  runs them for FSDP2 (no gradient reduction, parameters kept gathered: torch/distributed/pipelining/
  stage.py), and every chunk's last micro-batch then runs forward and backward with reduction.

AdamW (``fused=True``, as ``planner.runtime.apply`` runs it on CUDA) has its states created before the tracked step
(one untracked update from zero gradients), so the tracked step holds them as step 2 onwards does.
The tracker is ``torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker``: every tensor storage
created or freed on this rank is counted by its role (sharded / unsharded parameters and gradients,
activations, backward temporaries, all-gather and reduce-scatter buffers, optimizer states).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

from planner.runtime.memcheck.build import FAKE_DEVICE, RankBuild
from planner.runtime.tasks import Task
from planner.plans.schema import Plan

CATEGORIES = ("params", "grads", "optimizer_states", "activations", "temporaries", "buffers")
"""The check's categories, named as the cost model's memory breakdown where they mean the same."""
_TRACKER_CATEGORY = {
    "Sharded Param": "params", "Unsharded Param": "params", "Buffer": "params",
    "Sharded Grad": "grads", "Unsharded Grad": "grads", "OptState": "optimizer_states",
    "Activation": "activations", "Inputs": "buffers", "Temp": "temporaries",
    "All Gather": "buffers", "Reduce Scatter": "buffers",
}


class _PeakTracker(FSDPMemTracker):
    """FSDPMemTracker over several chunk roots that keeps only the rank's peak.

    Upstream updates every active module's own peak snapshot after each op, which walks all tracked
    modules per op (quadratic in depth: minutes for an 80-layer model); the rank's peak, the only
    figure the check reads, is updated exactly as upstream does (``MemTracker._update_peak_stats``).
    """

    def __init__(self, stages: list[nn.Module], optimizer: torch.optim.Optimizer) -> None:
        super().__init__(stages[0], optimizer)
        self._root_mod = nn.ModuleList(stages)  # instrument every local chunk's FSDP units
        self.propagating = 0
        """Depth of DTensor sharding propagations in progress (see :func:`_untracked_propagation`)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if self.propagating:  # global-shape metadata tensors of DTensor's propagation: never allocated
            return func(*args, **(kwargs or {}))
        return super().__torch_dispatch__(func, types, args, kwargs)

    def _update_peak_stats(self, peak_state: Any) -> None:
        for dev, snap in self._curr_mem_snap.items():
            if self._peak_mem.get(dev, 0) < snap["Total"]:
                self._peak_mem[dev] = snap["Total"]
                self._peak_mem_snap[dev] = dict(snap)


@contextlib.contextmanager
def _untracked_propagation(tracker: _PeakTracker) -> Iterator[None]:
    """Keep DTensor's sharding propagation out of the tracker's count.

    To learn an op's output shape, DTensor runs it on fake tensors of the *global* shape
    (``ShardingPropagator._propagate_tensor_meta_non_cached``, torch/distributed/tensor/
    _sharding_prop.py); on a GPU they allocate nothing. The tracker skips them by comparing fake
    modes, which fails when the whole step runs in one fake mode, as here (DTensor then reuses it:
    ``detect_fake_mode() or FakeTensorMode()``): a vocabulary-parallel loss was counted with two
    full-vocabulary fp32 logits (+7.8 GiB on Llama 3.1 8B at 8k tokens). For the tracked step the
    method is wrapped to raise ``tracker.propagating``; the original is restored on exit."""
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    original = ShardingPropagator._propagate_tensor_meta_non_cached

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        tracker.propagating += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            tracker.propagating -= 1

    ShardingPropagator._propagate_tensor_meta_non_cached = wrapped  # type: ignore[method-assign]
    try:
        yield
    finally:
        ShardingPropagator._propagate_tensor_meta_non_cached = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _gpu_attention_kernels() -> Iterator[None]:
    """Run SDPA as a GPU runs it: with attention dropout, in the fused kernel.

    On CUDA, SDPA with ``dropout_p > 0`` runs FlashAttention-2 or the memory-efficient kernel, which
    draw the dropout mask inside the kernel and keep for backward only the output, the log-sum-exp and
    the RNG seed and offset (torch/nn/attention ``sdp_kernel`` backends; Dao 2023, FlashAttention-2
    §3.1; ``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``: flash accepts dropout). The CPU
    flash kernel has no dropout (``sdp_utils_cpp.cpp``), so on the CPU tensors the check runs torch
    falls back to the math path, which stores the s x s probabilities, the dropout mask and the
    dropped probabilities of every head (GPT-2's ``attn_pdrop`` 0.1: +98 KiB per token and block at
    s = 1024, 16 heads, bf16) that no GPU run holds. For the tracked step ``F.scaled_dot_product_attention``
    is called with ``dropout_p = 0``, which takes the CPU flash kernel: the same saved tensors as the
    GPU's kernel with dropout (the RNG state aside: two scalars)."""
    import torch.nn.functional as F

    original = F.scaled_dot_product_attention

    def fused(*args: Any, **kwargs: Any) -> Any:
        if len(args) > 4:
            args = (*args[:4], 0.0, *args[5:])
        kwargs = {**kwargs, "dropout_p": 0.0} if len(args) <= 4 else kwargs
        return original(*args, **kwargs)

    F.scaled_dot_product_attention = fused
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


@dataclass(frozen=True)
class Action:
    """Forward (``F``) or backward (``B``) of local chunk ``chunk`` for micro-batch ``micro``."""

    kind: str
    chunk: int
    micro: int
    last: bool = False
    """The chunk's last backward of the step: gradients are reduced (FSDP2 sync)."""


def steady_pairs(pp: int, v: int, remaining: int) -> int:
    """Steady-state (backward, forward) pairs a rank runs before its memory repeats: until each of
    its ``v`` chunks has run one backward, i.e. ``(v - 1) pp + 1`` backwards (backward chunk
    ``v - 1 - (j // pp) mod v``), and, interleaved, until its last chunk (the one holding the loss on
    the last rank) runs a backward again after a forward, beside every chunk's gradients: backward
    ``v pp`` (the real-size oracle's Llama 3.1 8B at tp 2, pp 2, v 8: the second round's loss
    backward holds two more chunk-micro-batches than the drain's, 4.6 GiB); at most the
    ``remaining`` forwards after the warm-up."""
    return min(remaining, v * pp if v > 1 else 1)


def schedule_actions(plan: Plan, pp_rank: int) -> list[Action]:
    """The actions of pipeline rank ``pp_rank`` through its steady state (:func:`steady_pairs`),
    then each chunk's last micro-batch (see the module docstring for the orders and their sources)."""
    pp, v, m = plan.mesh.pp, plan.schedule.virtual_stages, plan.schedule.num_microbatches
    if pp == 1:  # micro-batches one after the other, each reduced (Runtime); the second meets the first's gradients
        return [a for mb in range(min(m, 2)) for a in (Action("F", 0, mb), Action("B", 0, mb, last=True))]
    name = plan.schedule.name
    if name == "gpipe":
        flight = m * v
    elif v > 1:
        flight = min(m * v, 2 * (pp - pp_rank - 1) + (v - 1) * pp + 1)
    else:
        flight = min(pp - pp_rank, m)
    pairs = steady_pairs(pp, v, m * v - flight)
    fwd = [_chunk_micro(i, pp, v, forward=True) for i in range(flight + pairs)]
    bwd = [_chunk_micro(j, pp, v, forward=False) for j in range(flight + pairs)]
    done = set(fwd)
    order = [x for x in bwd if x in done] + [x for x in fwd if x not in set(bwd)]  # the schedule's order, then drain the rest
    actions = [Action("F", c, mb) for c, mb in fwd[:flight]]
    for j in range(pairs):  # steady state: backward, then the next forward
        actions += [Action("B", *order[j], last=order[j][1] == m - 1), Action("F", *fwd[flight + j])]
    actions += [Action("B", c, mb, last=mb == m - 1) for c, mb in order[pairs:]]
    for chunk in range(v):
        if (chunk, m - 1) not in done:
            actions += [Action("F", chunk, m - 1), Action("B", chunk, m - 1, last=True)]
    return actions


def _chunk_micro(i: int, pp: int, v: int, forward: bool) -> tuple[int, int]:
    """(local chunk, micro-batch) of the i-th forward or backward (Megatron-LM interleaved order)."""
    if v == 1:
        return 0, i
    group = (i // pp) % v
    chunk = group if forward else v - 1 - group
    return chunk, (i // (pp * v)) * pp + i % pp


@contextlib.contextmanager
def _sync(stage: nn.Module, last: bool) -> Iterator[None]:
    """FSDP2 as ``PipelineStage`` sets it for a backward: reduce and reshard only on the last."""
    if hasattr(stage, "set_requires_gradient_sync"):
        stage.set_is_last_backward(last)
        stage.set_reshard_after_backward(last)
        stage.set_requires_gradient_sync(last)
    yield


def _inputs(build: RankBuild, chunk: int, micro: int, plan: Plan, buffers: "P2PBuffers", task: Task) -> torch.Tensor:
    """The chunk's input for one micro-batch: token ids (or a model's features), or the receive
    buffer the previous stage's activation lands in (:class:`P2PBuffers`)."""
    if plan.stages[build.chunks[chunk]].layers[0] == 0:
        return task.placeholder_input(plan.schedule.micro_batch, plan.request.seq_len // build.cp, FAKE_DEVICE)
    return buffers.recv[(chunk, micro)]


def _boundary_tensor(build: RankBuild, plan: Plan, boundaries: dict[int, tuple[tuple[int, ...], torch.dtype]],
                     layer: int, grad: bool) -> torch.Tensor:
    """An empty tensor shaped as the local hidden state entering ``layer`` for one micro-batch
    (sequence-sharded under SP and CP, bf16 under mixed precision): a receive buffer; ``grad``: the
    activation buffer, a leaf that requires grad, rather than the gradient buffer."""
    shape, dtype = boundaries[layer]
    shape = (shape[0], shape[1] // (build.sp_shards * build.cp), *shape[2:]) if len(shape) > 1 else shape
    if build.mixed_precision and dtype.is_floating_point:
        dtype = torch.bfloat16
    return torch.empty(shape, dtype=dtype, device=FAKE_DEVICE, requires_grad=grad and dtype.is_floating_point)


@dataclass
class P2PBuffers:
    """The receive buffers ``torch.distributed.pipelining.PipelineStage`` allocates for a step, one per
    micro-batch and local chunk (torch 2.13 pipelining/stage.py ``_setup_forward_recv_info``: every
    non-first stage, for each of the schedule's ``n_microbatches``, a buffer of its input, which the
    forward then takes as its leaf input; ``_create_grad_recv_info`` via ``_setup_backward_recv_info``:
    every non-last stage, one buffer of its output's gradient per micro-batch). They are made once,
    at the first step, and reused: every step holds all of them throughout."""

    recv: dict[tuple[int, int], torch.Tensor]
    """(local chunk, micro-batch) -> the activation receive buffer (non-first chunks)."""
    grad: dict[tuple[int, int], torch.Tensor]
    """(local chunk, micro-batch) -> the gradient receive buffer (non-last chunks)."""


def p2p_buffers(plan: Plan, build: RankBuild, boundaries: dict[int, tuple[tuple[int, ...], torch.dtype]]) -> P2PBuffers:
    """This rank's :class:`P2PBuffers` (empty without pipelining)."""
    recv: dict[tuple[int, int], torch.Tensor] = {}
    grad: dict[tuple[int, int], torch.Tensor] = {}
    if plan.mesh.pp == 1:
        return P2PBuffers(recv, grad)
    for c, k in enumerate(build.chunks):
        for mb in range(plan.schedule.num_microbatches):
            if k > 0:
                recv[(c, mb)] = _boundary_tensor(build, plan, boundaries, plan.stages[k].layers[0], grad=True)
            if k < len(plan.stages) - 1:
                grad[(c, mb)] = _boundary_tensor(build, plan, boundaries, plan.stages[k + 1].layers[0], grad=False)
    return P2PBuffers(recv, grad)


def _cp_attention(build: RankBuild) -> contextlib.AbstractContextManager:
    """The runtime's all-gather-KV attention under context parallelism (``planner.runtime.context_parallel``),
    in its kernel-shaped form: the flash kernel on the gathered K/V, as a GPU runs it."""
    if build.cp == 1:
        return contextlib.nullcontext()
    from planner.runtime.context_parallel import allgather_sdpa

    return allgather_sdpa(build.cp_group, build.cp, 0, exact=False)


def _loss_context(build: RankBuild) -> contextlib.AbstractContextManager:
    if build.loss_parallel:
        from torch.distributed.tensor.parallel import loss_parallel

        return loss_parallel()
    return contextlib.nullcontext()


def _loss(build: RankBuild, logits: torch.Tensor, labels: torch.Tensor, task: Task) -> torch.Tensor:
    """The runtime's loss on the last chunk's output: a pipeline stage under TP hands on its local
    vocabulary shard, which the loss wraps back into a DTensor as ``planner.runtime.apply`` does."""
    from torch.distributed.tensor import DTensor

    from planner.runtime.apply import _vocab_sharded_loss

    if build.loss_parallel and not isinstance(logits, DTensor):
        return _vocab_sharded_loss(task.loss, build.tp_mesh, logits, labels)
    return task.loss(logits, labels)


def measure_step(plan: Plan, build: RankBuild, fake_mode: FakeTensorMode,
                 boundaries: dict[int, tuple[tuple[int, ...], torch.dtype]], task: Task) -> dict[str, float]:
    """Bytes per category at this rank's peak (``CATEGORIES``) plus ``total``, from FSDPMemTracker."""
    last_chunk = len(plan.stages) - 1
    params = [p for stage in build.stages for p in stage.parameters()]
    with fake_mode:
        opt = torch.optim.AdamW(params, lr=1e-3, fused=True)
        for p in params:
            p.grad = torch.zeros_like(p)
        opt.step()
        opt.zero_grad(set_to_none=True)
        tracker = _PeakTracker(build.stages, opt)
        with tracker, _untracked_propagation(tracker), _gpu_attention_kernels(), _cp_attention(build):
            buffers = p2p_buffers(plan, build, boundaries)
            tracker.track_inputs((list(buffers.recv.values()), list(buffers.grad.values())))
            held: dict[tuple[int, int], tuple[torch.Tensor, ...]] = {}
            for act in schedule_actions(plan, build.pp_rank):
                stage = build.stages[act.chunk]
                key = (act.chunk, act.micro)
                if act.kind == "F":
                    # FSDPMemTracker refuses a root module's second forward as "multiple iterative calls";
                    # its per-module stats are never read here (only the rank's peak), so drop the root's
                    # (only the root's: a backward still to run reads its inner modules' entries)
                    tracker.memory_tracking.pop(stage, None)
                    with _loss_context(build):
                        out = stage(_inputs(build, act.chunk, act.micro, plan, buffers, task))
                        # a pipeline stage's output stays in ``PipelineStage.fwd_cache`` until its
                        # backward, the last stage's logits too (stage.py ``forward_one_chunk``); without
                        # pipelining the runtime drops the logits once the loss is computed
                        if build.chunks[act.chunk] == last_chunk:
                            loss = _loss(build, out, task.placeholder_labels(out), task)
                            held[key] = (loss, out) if plan.mesh.pp > 1 else (loss,)
                            del loss
                        else:
                            held[key] = (out,)
                    del out
                    continue
                out = held.pop(key)
                with _sync(stage, act.last), _loss_context(build):
                    out[0].backward(buffers.grad.get(key))
                if key in buffers.recv:  # stage_backward hands the input's gradient on and drops it (_backward.py)
                    buffers.recv[key].grad = None
                del out
            opt.step()
            opt.zero_grad(set_to_none=True)
        snap = tracker.get_tracker_snapshot("peak").get(FAKE_DEVICE, {})
    result = dict.fromkeys(CATEGORIES, 0.0)
    for key, value in snap.items():
        name = getattr(key, "value", key)
        if name != "Total":
            result[_TRACKER_CATEGORY[name]] += float(value)
    result["total"] = float(snap.get("Total", 0))
    return result


def boundary_shapes(module: nn.Module, plan: Plan, task: Task) -> dict[int, tuple[tuple[int, ...], torch.dtype]]:
    """Shape and dtype of each layer's input for one micro-batch, from a forward of the unsplit
    model on ``meta`` (no memory, no autograd): what a pipeline stage starting there receives."""
    from planner.runtime.layers import map_layers
    from planner.runtime.stage import StageModule

    lmap = map_layers(module, plan)
    chain = StageModule(module, list(lmap.units), ["none"] * len(lmap.units), lmap.rotary_path)
    seen: dict[int, tuple[tuple[int, ...], torch.dtype]] = {}
    handles = []
    for unit in lmap.units:
        def hook(_mod: nn.Module, args: tuple, index: int = unit.index) -> None:
            seen.setdefault(index, (tuple(args[0].shape), args[0].dtype))
        handles.append(chain.layer(unit).register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            chain(task.placeholder_input(plan.schedule.micro_batch, plan.request.seq_len, "meta"))
    finally:
        for h in handles:
            h.remove()
    return seen
