"""Record every op a traced model runs: FLOPs, bytes, outputs, owner module, data flow, saved tensors.

The :class:`Recorder` sits on top of ``torch.utils.flop_counter.FlopCounterMode`` as a dispatch mode
(one op at a time, its FLOPs read as the counter's increase), and under
``torch.autograd.graph.saved_tensors_hooks`` (what autograd keeps for backward). Ops are grouped into
layer *instances*: one per call of a unit (:mod:`planner.intake.trace.units`); ops outside any unit, or in a
light unit, are glue and join the instance that ran last. Tensors are followed by storage, so an op
that reads a tensor another instance wrote adds to the edge between the two instances; only tensors
that depend on the model's inputs count (rotary tables and masks built from ``arange`` can be
recomputed on any pipeline stage).

Ops that only read parameters (weight casts, one expert's weights picked by a routing index) are
per step, not per token: their bytes are not counted and what they produce is never an activation.
An edge carries a tensor's elements but never more than its storage (a broadcast view is sent once).

Byte counts are at training precision: floating-point tensors at ``costmodel.local.ACT_BYTES`` (bf16)
bytes per element whatever dtype the module was built in; integer and boolean tensors at their size.

Scaled-dot-product attention is taken whole at the ``F.scaled_dot_product_attention`` call (the CPU
and meta kernels would otherwise decompose it into an s x s ``bmm``/softmax that no GPU runs, and
the CPU kernel reads mask values that fake tensors do not have):
forward FLOPs ``2·b·h·s_q·s_kv·(d_qk + d_v)`` (= 4·b·h·s_q·s_kv·d), times
``costmodel.flops.CAUSAL_ATTENTION_FRACTION`` (½) when ``is_causal`` (meshplan's FLOP convention);
saved for backward as FlashAttention does: q, k, v, the output and an fp32 log-sum-exp per row.
The same formula is registered with ``FlopCounterMode`` for the CPU kernel
``aten._scaled_dot_product_flash_attention_for_cpu``, which has none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode
from torch.overrides import TorchFunctionMode

from costmodel.flops import CAUSAL_ATTENTION_FRACTION
from costmodel.local import ACT_BYTES
import planner.intake.trace.routing as routing
from planner.intake.trace.shadow import Shadows, mask_facts
from planner.intake.trace.stubs import STUB_OP_NAME, template_rep
from planner.intake.trace.units import UnitMap

LSE_BYTES = 4
"""FlashAttention keeps one fp32 log-sum-exp per query row and head for its backward."""

_INDEXING = {"embedding", "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only",
             "index_select", "gather", "index"}
"""Ops that read only the rows they return (a lookup reads b·s rows, not the whole table)."""

_MATMULS = {"mm": (0, 1), "bmm": (0, 1), "addmm": (1, 2), "baddbmm": (1, 2)}
"""Matrix operand positions of the matmul ops FlopCounterMode counts."""


def sdpa_flops(q_shape: tuple, k_shape: tuple, v_shape: tuple, is_causal: bool) -> float:
    """Forward FLOPs of scaled-dot-product attention: QKᵀ and PV, 2·b·h·s_q·s_kv·(d_qk + d_v).

    Narayanan et al. 2021 appendix (4·b·s²·h per layer forward for QKᵀ and attention·V); halved for a
    causal mask per meshplan's convention (``costmodel.flops``).
    """
    batch_heads = math.prod(int(d) for d in q_shape[:-2])
    s_q, d_qk = int(q_shape[-2]), int(q_shape[-1])
    s_kv, d_v = int(k_shape[-2]), int(v_shape[-1])
    full = 2.0 * batch_heads * s_q * s_kv * (d_qk + d_v)
    return full * (CAUSAL_ATTENTION_FRACTION if is_causal else 1.0)


def _cpu_flash_flops(q: tuple, k: tuple, v: tuple, dropout_p: float = 0.0, is_causal: bool = False,
                     *args: Any, out_shape: Any = None, **kwargs: Any) -> float:
    """FlopCounterMode formula for ``aten._scaled_dot_product_flash_attention_for_cpu``."""
    return sdpa_flops(q, k, v, is_causal)


def train_bytes(t: torch.Tensor) -> float:
    """Bytes of ``t`` at training precision (see module docstring)."""
    return float(t.numel() * (ACT_BYTES if t.is_floating_point() else t.element_size()))


def storage_bytes(t: torch.Tensor) -> float:
    """Bytes of the whole storage behind ``t`` (what saving a view keeps alive), at training precision."""
    nbytes = t.untyped_storage().nbytes()
    return float(nbytes * ACT_BYTES / t.element_size()) if t.is_floating_point() else float(nbytes)


def edge_bytes(t: torch.Tensor) -> float:
    """Bytes that sending ``t`` to another stage moves: its elements, but never more than its storage
    (a broadcast ``expand`` view of an index vector is one vector, not a matrix)."""
    return min(train_bytes(t), storage_bytes(t))


def sid(t: torch.Tensor) -> int:
    """Identity of the storage behind ``t`` (views share it)."""
    return t.untyped_storage()._cdata


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One forward op of the traced model."""

    op: str
    """Operator name (``aten.addmm``, ``aten.scaled_dot_product_attention``, ``meshplan.block_stub``)."""
    module: str
    """Path of the innermost module that ran it (``nn_module_stack`` / module hooks)."""
    kind: str
    """``matmul`` (GEMM or convolution), ``attention`` (SDPA), ``memory``, ``view`` or ``stub``."""
    flops: float
    bytes_read: float
    bytes_written: float
    out_shapes: tuple[tuple[int, ...], ...]
    out_dtypes: tuple[str, ...]
    glue: bool
    """Ran outside any unit (container code) or in a light unit; joins the current layer."""
    act_act: bool = False
    """A matmul of two activations (attention written out with matmul/softmax)."""
    dims: tuple[int, ...] = ()
    """(m, k, n) of a matmul; (heads, head_dim, s_q, s_kv) of an attention op."""
    causal: bool = False
    """An SDPA call with ``is_causal=True``."""
    data_in: bool = False
    """Read a tensor that depends on the model inputs (a token lookup, not a position lookup)."""


@dataclass
class Instance:
    """One call of a unit: the ops and saved tensors of one layer of the trace."""

    index: int
    unit: str
    name: str
    ops: list[OpRecord] = field(default_factory=list)
    saved: dict[int, float] = field(default_factory=dict)
    glue_saved: dict[int, float] = field(default_factory=dict)
    stub_of: str | None = None
    """Representative path when the call was stubbed (:data:`planner.intake.trace.stubs.OPAQUE` if opaque)."""
    inputs: dict[int, dict[int, float]] = field(default_factory=dict)
    """Producer instance -> storage -> bytes of the data tensors this instance read from it."""
    loose_params: int = 0
    """Parameters owned directly by a container module, first read by this instance."""
    reads_sequence: bool = False
    """One of its own (not glue) ops read a tensor computed from an input whose length follows
    ``seq_len`` (a decoder's token ids, not a speech encoder's fixed-length features)."""


def _is_view(func: Any) -> bool:
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


def _is_inplace(func: Any) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


class Recorder:
    """Collects :class:`Instance` records for one trace; see the module docstring."""

    def __init__(self, units: UnitMap, param_tensors: list[torch.Tensor], loose: list[torch.Tensor],
                 inputs: list[torch.Tensor], sequence_inputs: list[torch.Tensor] | None = None) -> None:
        self.units = units
        self._seq: set[int] = {sid(t) for t in (inputs if sequence_inputs is None else sequence_inputs)}
        """Storages computed from the inputs whose length follows ``seq_len`` (all inputs by default)."""
        self.instances: list[Instance] = []
        self.path = ""
        self.in_flight: str | None = None
        self.suppress = 0
        self._pending = Instance(index=-1, unit="", name="")
        self._calls: dict[str, int] = {}
        self._producer: dict[int, int] = {}
        self._data: set[int] = {sid(t) for t in inputs}
        self._params = {sid(p) for p in param_tensors}
        self._weights = set(self._params)
        """Storages computed from parameters alone (casts, expert weight gathers): per step, not per token."""
        self._loose = {sid(p): p.numel() for p in loose}
        self._keep: list[torch.Tensor] = list(inputs)
        self.shadows = Shadows()

    # -- attribution ---------------------------------------------------------------------------
    def _target(self) -> tuple[Instance, bool]:
        unit = self.units.resolve(self.path)
        current = self.instances[-1] if self.instances else None
        if unit is None or unit.light:
            return (current if current is not None else self._pending), True
        if current is not None and current.unit == unit.path:
            return current, False
        calls = self._calls.get(unit.path, 0)
        self._calls[unit.path] = calls + 1
        name = unit.path if calls == 0 else f"{unit.path}#{calls}"
        inst = Instance(index=len(self.instances), unit=unit.path, name=name)
        self.instances.append(inst)
        if inst.index == 0:
            self._flush_pending(inst)
        return inst, False

    def _flush_pending(self, first: Instance) -> None:
        """Glue that ran before any unit (input reshapes, position ids) joins the first layer."""
        first.ops.extend(self._pending.ops)
        first.glue_saved.update(self._pending.glue_saved)
        first.loose_params += self._pending.loose_params
        for key, owner in self._producer.items():
            if owner == -1:
                self._producer[key] = 0

    # -- events --------------------------------------------------------------------------------
    def _consume(self, inst: Instance, tensors: list[torch.Tensor]) -> bool:
        """Note reads of ``tensors`` by ``inst``; True when any depends on the model inputs."""
        data_in = False
        for t in tensors:
            key = sid(t)
            if key in self._loose:
                inst.loose_params += self._loose.pop(key)
            if key not in self._data:
                continue
            data_in = True
            src = self._producer.get(key)
            if src is not None and src != inst.index and src >= 0 and inst.index >= 0:
                edge = inst.inputs.setdefault(src, {})
                edge[key] = max(edge.get(key, 0.0), edge_bytes(t))
        return data_in

    def _produce(self, inst: Instance, tensors: list[torch.Tensor], data_in: bool, rebind: bool) -> None:
        for t in tensors:
            key = sid(t)
            if rebind or key not in self._producer:
                self._producer[key] = inst.index
                self._keep.append(t)
            if data_in:
                self._data.add(key)

    def on_op(self, func: Any, args: tuple, kwargs: dict, out: Any, flops: float) -> None:
        """Record one dispatched op (called by the dispatch mode after it ran)."""
        inst, glue = self._target()
        ins = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        outs = [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]
        data_in = self._consume(inst, ins)
        self._follow_sequence(inst, glue, ins, outs)
        name = func._schema.name.split("::")[-1]
        qualified = str(func.overloadpacket) if hasattr(func, "overloadpacket") else name
        floats = [t for t in ins if t.is_floating_point()]
        weights_only = bool(floats) and all(sid(t) in self._weights for t in floats) and \
            all(t.numel() <= 1 or sid(t) not in self._data for t in ins if not t.is_floating_point())
        if weights_only:
            self._weights.update(sid(t) for t in outs)
        if qualified == STUB_OP_NAME:
            inst.stub_of = template_rep(args[1] if len(args) > 1 else kwargs["template"])
            kind, read, written = "stub", 0.0, 0.0
        elif _is_view(func):
            kind, read, written = "view", 0.0, 0.0
        else:
            kind = "matmul" if flops > 0 else "memory"
            written = 0.0 if weights_only else sum(train_bytes(t) for t in outs)
            if weights_only:
                read = 0.0  # a weight cast or gather: once per step whatever the tokens
            elif name in _INDEXING:
                read = written + sum(train_bytes(t) for t in ins if not t.is_floating_point())
            else:
                read = sum(train_bytes(t) for t in ins)
        self._produce(inst, outs, data_in, rebind=kind not in ("view",) and (kind == "stub" or _is_inplace(func)))
        if kind in ("memory", "view"):
            self.shadows.run(func, args, kwargs, out)
        act_act, dims = self._matmul_facts(name, args) if kind == "matmul" else (False, ())
        inst.ops.append(OpRecord(
            op=qualified, module=self.path, kind=kind, flops=float(flops), bytes_read=read,
            bytes_written=written, out_shapes=tuple(tuple(int(d) for d in t.shape) for t in outs),
            out_dtypes=tuple(str(t.dtype).removeprefix("torch.") for t in outs), glue=glue,
            act_act=act_act, dims=dims, data_in=data_in,
        ))

    def _follow_sequence(self, inst: Instance, glue: bool, ins: list[torch.Tensor], outs: list[torch.Tensor]) -> None:
        """Carry the sequence mark from ``ins`` to ``outs``; an instance's own op reading it marks the instance."""
        if any(sid(t) in self._seq for t in ins):
            self._seq.update(sid(t) for t in outs)
            inst.reads_sequence = inst.reads_sequence or not glue

    def _matmul_facts(self, name: str, args: tuple) -> tuple[bool, tuple[int, ...]]:
        """Whether both matrix operands are activations, and the (m, k, n) of the product."""
        slots = _MATMULS.get(name)
        if slots is None:
            return False, ()
        a, b = args[slots[0]], args[slots[1]]
        act_act = sid(a) not in self._params and sid(b) not in self._params
        return act_act, (int(a.shape[-2]), int(a.shape[-1]), int(b.shape[-1]))

    def on_saved(self, t: torch.Tensor) -> torch.Tensor:
        """``saved_tensors_hooks`` pack hook: attribute a tensor kept for backward (not parameters)."""
        if self.suppress or not isinstance(t, torch.Tensor):
            return t
        key = sid(t)
        if key in self._weights:
            return t
        inst, glue = self._target()
        (inst.glue_saved if glue else inst.saved)[key] = storage_bytes(t)
        self._keep.append(t)
        return t

    def sdpa(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0, is_causal: bool = False,
             scale: float | None = None, enable_gqa: bool = False) -> torch.Tensor:
        """``F.scaled_dot_product_attention`` as one recorded op (see the module docstring).

        Its output comes from the ``meshplan::block_stub`` op (shape only, differentiable): CPU and
        meta kernels would decompose the call, or read the mask's values, which fake tensors lack.
        """
        self.suppress += 1
        try:
            out = _attention_output(query, value)
        finally:
            self.suppress -= 1
        inst, glue = self._target()
        ins = [t for t in (query, key, value, attn_mask) if isinstance(t, torch.Tensor)]
        data_in = self._consume(inst, ins)
        self._follow_sequence(inst, glue, ins, [out])
        self._produce(inst, [out], data_in, rebind=False)
        saved = inst.glue_saved if glue else inst.saved
        for t in (query, key, value, out):
            saved[sid(t)] = storage_bytes(t)
        rows = math.prod(int(d) for d in query.shape[:-1])
        saved[-(len(self._keep) + 1)] = float(rows * LSE_BYTES)  # no storage: a key no storage has
        self._keep.append(out)
        heads, s_q, d = int(query.shape[-3]) if query.ndim > 2 else 1, int(query.shape[-2]), int(query.shape[-1])
        share, causal = self._mask(attn_mask, s_q, int(key.shape[-2]), bool(is_causal))
        inst.ops.append(OpRecord(
            op="aten.scaled_dot_product_attention", module=self.path, kind="attention",
            flops=share * sdpa_flops(tuple(query.shape), tuple(key.shape), tuple(value.shape), causal),
            bytes_read=sum(train_bytes(t) for t in ins), bytes_written=train_bytes(out),
            out_shapes=(tuple(int(x) for x in out.shape),), out_dtypes=(str(out.dtype).removeprefix("torch."),),
            glue=glue, dims=(heads, d, s_q, int(key.shape[-2])), causal=causal, data_in=data_in,
        ))
        return out

    def _mask(self, mask: torch.Tensor | None, s_q: int, s_kv: int, is_causal: bool) -> tuple[float, bool]:
        """(share of the work a non-causal mask leaves, causal) of an SDPA call; see ``shadow``."""
        real = self.shadows.get(mask) if isinstance(mask, torch.Tensor) else None
        if is_causal or real is None:
            return 1.0, is_causal
        share, causal = mask_facts(real, s_q, s_kv)
        return (1.0, True) if causal else (share, False)

    def data_storages(self, tensors: list[torch.Tensor]) -> list[tuple[int, int, float]]:
        """(producer instance, storage, bytes) of those ``tensors`` that depend on the model inputs."""
        out = []
        for t in tensors:
            key = sid(t)
            if key in self._data and key in self._producer:
                out.append((self._producer[key], key, edge_bytes(t)))
        return out

    def unread_loose_params(self) -> int:
        """Container-owned parameters no op read."""
        return sum(self._loose.values())


def _attention_output(query: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    shape = ",".join(str(int(d)) for d in (*query.shape[:-1], value.shape[-1]))
    dtype = str(query.dtype).removeprefix("torch.")
    template = f"<attention>|{query.device.type}|{dtype}:{shape}"
    return torch.ops.meshplan.block_stub([query, value], template)[0]


class DispatchRecorder(TorchDispatchMode):
    """Dispatch mode feeding every op to a :class:`Recorder`, FLOPs from the FlopCounterMode below it."""

    def __init__(self, recorder: Recorder, counter: FlopCounterMode) -> None:
        super().__init__()
        self.recorder = recorder
        self.counter = counter

    def _total(self) -> float:
        return float(sum(self.counter.flop_counts["Global"].values()))

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        rec = self.recorder
        if rec.suppress or func.namespace == "prim":
            return func(*args, **kwargs)
        rec.in_flight = str(func.overloadpacket)
        before = self._total()
        handled, out = routing.resolve(func, args, kwargs, rec.shadows)
        if not handled:
            out = func(*args, **kwargs)
            routing.give_routing(func, args, kwargs, out, rec.shadows)
        rec.in_flight = None
        if isinstance(out, (torch.Tensor, tuple, list)):
            rec.on_op(func, args, kwargs, out, self._total() - before)
        return out


class SdpaInterceptor(TorchFunctionMode):
    """Hands ``F.scaled_dot_product_attention`` calls to :meth:`Recorder.sdpa` whole."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention and not self.recorder.suppress:
            return self.recorder.sdpa(*args, **kwargs)
        return func(*args, **kwargs)


def flop_counter() -> FlopCounterMode:
    """A silent FlopCounterMode that also counts the CPU flash-attention kernel."""
    mapping = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_flops}
    return FlopCounterMode(display=False, custom_mapping=mapping)
