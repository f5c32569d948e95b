"""Turn recorded layer instances into a ModelSpec: recognised layers, generic layers, data edges.

Each unit call (:class:`planner.intake.trace.record.Instance`) becomes one layer, except that a token
embedding absorbs a position table and an embedding norm that follow it (``EmbeddingLayer``), and a
transformer block whose parameters exceed its spec's count is followed by a small pass-through
generic layer holding the surplus. Per-token figures divide the traced totals by the micro-batch's
tokens: ``micro_batch x seq_len`` for sequence inputs, ``micro_batch x tokens_per_sample`` otherwise
(``tokens_per_sample`` is the attention length of a ViT-like model, else 1: one image or one sample).
Attention-like FLOPs are further divided by that context length (``GenericLayer`` convention).
The FLOPs of a mixture-of-experts block, whose routing depends on values meta tensors do not have
(its attention FLOPs, which no routing changes, stay the traced ones where attention ran),
and of an opaque block (nothing ran, :mod:`planner.intake.trace.stubs`) are ``costmodel.flops``' formulas
for the recognised layer; an opaque block's saved bytes are unknown (0 in its :class:`LayerTrace`).

TP modes of generic layers: a Linear is ``column``, or ``row`` when its only data input is a column
Linear (Megatron's pairing); a unit of Linears and element-wise ops is ``column_row``; a single
embedding table is split by rows (``vocab``), a group of tables is placed table-wise (``table``)
unless one table holds over half the rows (then ``vocab``); convolutions, norms and anything else are
``none`` (replicated, data parallel).

A layer's output bytes are the input-dependent tensors it hands to later layers (or returns), each
counted once however many layers read it; in the spec, a layer no later layer reads (the vocabulary
projection of a model whose head is generic, as Mamba's) sends nothing across a pipeline cut, as a
``HeadLayer`` sends nothing: its logits stay on the last stage. Every edge is measured; the spec's ``extra_edges`` are
those between layers that are not neighbours. Parameters no op used (modules never called) are kept
in a last generic layer, ``unused_parameters``, so the spec holds every parameter of the module.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from costmodel.flops import layer_fwd_flops
from costmodel.params import layer_params
from costmodel.local import ACT_BYTES
from costmodel.specs import (EmbeddingLayer, GenericLayer, HeadLayer, Layer, LayerEdge, NormLayer,
                             TransformerLayer, TpMode)
from planner.intake.trace.notes import OPAQUE_FLOPS_PER_PARAM, pattern as _pattern, trace_notes
from planner.intake.trace.recognize import recognize_block
from planner.intake.trace.record import Instance, OpRecord
from planner.intake.trace.run import RawTrace
from planner.intake.trace.selective import selective_saved_bytes
from planner.intake.trace.shared import SharedSaves, shared_saves
from planner.intake.trace.stubs import OPAQUE
from planner.intake.trace.types import LayerTrace
from planner.intake.trace.units import UnitMap, is_table, linear_dims, norm_kind


@dataclass
class Slot:
    """One spec layer under construction: the instances it covers and, once known, its layer."""

    insts: list[int]
    layer: Layer | None = None
    params: int = 0
    passthrough: bool = False
    """A surplus-parameter layer that forwards its block's output unchanged."""
    tp_mode: TpMode = "none"


@dataclass
class Shape:
    """The traced micro-batch: tokens and context length that per-token figures divide by."""

    tokens: int
    context: int
    tokens_per_sample: int
    fixed: int = 0
    """Positions per sample of the layers that read no input following ``seq_len`` (Whisper's
    encoder: the key count of their attention, 1,500); 0 when every layer follows the sequence."""

    def own(self, fixed: int) -> "Shape":
        """The shape a layer of ``fixed`` positions per sample ran at (itself when ``fixed`` is 0)."""
        if not fixed:
            return self
        return Shape(tokens=self.tokens // self.context * fixed, context=fixed, tokens_per_sample=0)


@dataclass
class Built:
    """Result of :func:`build_layers`."""

    layers: list[Layer]
    traces: list[LayerTrace]
    edges: list[LayerEdge]
    tied: bool
    max_positions: int
    notes: list[str]
    """Assumptions the estimate states (generic layers and why; see :func:`_notes`)."""





class _Builder:
    def __init__(self, units: UnitMap, raw: RawTrace, shape: Shape) -> None:
        self.units = units
        self.raw = raw
        self.shape = shape
        self.insts = raw.instances
        self.first = {}
        for inst in self.insts:
            self.first.setdefault(inst.unit, inst)
        self.params = self._assign_params()
        self._recognised: dict[str, tuple[TransformerLayer, int] | str] = {}
        self.why: dict[str, str] = {}
        """Pattern name of each block-like unit planned as generic -> why it was not recognised."""
        self._linear_modes: dict[int, TpMode] = {}

    # -- per-instance facts --------------------------------------------------------------------
    def _assign_params(self) -> list[int]:
        seen: set[int] = set()
        out = []
        for inst in self.insts:
            own = [p for p in self.units.modules[inst.unit].parameters() if id(p) not in seen]
            seen.update(id(p) for p in own)
            out.append(sum(p.numel() for p in own) + inst.loose_params)
        return out

    def rep(self, inst: Instance) -> Instance:
        """The instance whose own ops stand for ``inst`` (itself unless it was a stubbed repeat)."""
        if inst.stub_of and inst.stub_of != OPAQUE:
            return self.first.get(inst.stub_of, inst)
        return inst

    def ops(self, inst: Instance) -> list[OpRecord]:
        rep = self.rep(inst)
        own = [op for op in rep.ops if not op.glue and op.kind != "stub"]
        return own + [op for op in inst.ops if op.glue]

    def saved(self, inst: Instance) -> float:
        rep = self.rep(inst)
        return sum(rep.saved.values()) + sum(inst.glue_saved.values())

    def module(self, inst: Instance) -> nn.Module:
        return self.units.modules[inst.unit]

    def lookup_reads_data(self, inst: Instance) -> bool:
        return any(op.data_in for op in inst.ops if op.op.endswith("embedding"))

    # -- language-model anatomy ----------------------------------------------------------------
    def anatomy(self) -> tuple[int | None, int | None]:
        """Indices of the token embedding and the vocabulary head instances (None when absent)."""
        emb = next((i.index for i in self.insts if isinstance(self.module(i), nn.Embedding)
                    and "#" not in i.name and self.lookup_reads_data(i)), None)
        if emb is None or not self.insts:
            return None, None
        last = self.insts[-1]
        dims = linear_dims(self.module(last))
        width = self.module(self.insts[emb]).embedding_dim
        has_blocks = any(self._block_like(i) for i in self.insts)
        if dims is None or dims[0] != width or not has_blocks or last.index == emb:
            return emb, None
        return emb, last.index

    # -- slots ---------------------------------------------------------------------------------
    def slots(self) -> tuple[list[Slot], bool, int]:
        emb, head = self.anatomy()
        lm = head is not None
        slots: list[Slot] = []
        tied, positions = False, 0
        i = 0
        while i < len(self.insts):
            inst = self.insts[i]
            if lm and i == emb:
                slot, i, positions = self._embedding_slot(i)
                slots.append(slot)
                continue
            if lm and i == head:
                slot, tied = self._head_slot(inst, self.insts[emb])  # type: ignore[index]
                slots.append(slot)
            elif self._block_like(inst):
                slots.extend(self._block_slots(inst, lm))
            else:
                slots.append(self._plain_slot(inst))
            i += 1
        return slots, tied, positions

    def _embedding_slot(self, i: int) -> tuple[Slot, int, int]:
        table: nn.Embedding = self.module(self.insts[i])  # type: ignore[assignment]
        insts, positions, norm = [i], 0, None
        nxt = self.insts[i + 1] if i + 1 < len(self.insts) else None
        if nxt is not None and isinstance(self.module(nxt), nn.Embedding) and not self.lookup_reads_data(nxt) \
                and self.module(nxt).embedding_dim == table.embedding_dim and "#" not in nxt.name \
                and self.module(nxt).num_embeddings >= self.shape.context:  # BERT's 2-row token types are not positions
            positions = self.module(nxt).num_embeddings
            insts.append(i + 1)
        nxt_i = insts[-1] + 1
        if nxt_i + 1 < len(self.insts):
            cand, after = self.insts[nxt_i], self.insts[nxt_i + 1]
            kind = norm_kind(self.module(cand))
            if kind and self._block_like(after) and \
                    self.module(cand).weight.numel() == table.embedding_dim:
                norm = kind
                insts.append(nxt_i)
        layer = EmbeddingLayer(vocab_size=table.num_embeddings, hidden_size=table.embedding_dim,
                               max_positions=positions, norm=norm)
        slot = Slot(insts, layer, sum(self.params[k] for k in insts), tp_mode="vocab")
        if layer_params(layer) != slot.params:
            return Slot([i], None, self.params[i], tp_mode="vocab"), i + 1, 0
        return slot, insts[-1] + 1, positions

    def _head_slot(self, inst: Instance, emb: Instance) -> tuple[Slot, bool]:
        module = self.module(inst)
        d_in, d_out = linear_dims(module)  # type: ignore[misc]
        tied = getattr(module, "weight", None) is getattr(self.module(emb), "weight", object())
        layer = HeadLayer(vocab_size=d_out, hidden_size=d_in, tied=tied,
                          bias=module._parameters.get("bias") is not None)
        if layer_params(layer) != self.params[inst.index]:
            return Slot([inst.index], None, self.params[inst.index], tp_mode="column"), False
        return Slot([inst.index], layer, self.params[inst.index], tp_mode="vocab"), tied

    def _block_like(self, inst: Instance) -> bool:
        """A transformer-like unit, or a sequence element that ran an attention call (its attention
        reached through a helper method rather than a submodule)."""
        kind = self.units.units[inst.unit].kind
        if kind == "block":
            return True
        return kind == "element" and any(op.kind == "attention" for op in self.rep(inst).ops if not op.glue)

    def _block_slots(self, inst: Instance, lm: bool) -> list[Slot]:
        rep = self.rep(inst)
        key = rep.unit
        if key not in self._recognised:
            ops = [op for op in rep.ops if not op.glue and op.kind != "stub"]
            fixed = self.fixed(inst)
            found = recognize_block(self.module(rep), rep.unit, ops, name=_pattern(rep.unit), lm=lm,
                                    context=self.shape.own(fixed).context)
            self._recognised[key] = found if isinstance(found, str) else (self._lengths(found[0], fixed), found[1])
        found = self._recognised[key]
        params = self.params[inst.index]
        if isinstance(found, str):
            self.why.setdefault(_pattern(inst.unit), found)
            return [self._plain_slot(inst)]
        if params != layer_params(found[0]) + found[1]:
            self.why.setdefault(_pattern(inst.unit), f"its {params:,} parameters differ from the "
                                f"{layer_params(found[0]) + found[1]:,} of the layout read from it")
            return [self._plain_slot(inst)]
        layer, surplus = found
        if any(type(m).__name__ == "Conv1D" for m in self.module(inst).modules()):  # transformers' GPT-2 projections
            layer = layer.model_copy(update={"conv1d": True})
        if _is_transformers_module(self.module(inst)):  # runs as transformers' own block, as a config.json's does
            layer = layer.model_copy(update={"transformers_block": True})
        slots = [Slot([inst.index], layer, params - surplus, tp_mode="column_row")]
        if surplus:
            extra = Slot([], None, surplus, passthrough=True)
            slots.append(extra)
        return slots

    def fixed(self, inst: Instance) -> int:
        """``shape.fixed`` for an instance none of whose own ops read the sequence, else 0."""
        return self.shape.fixed if self.shape.fixed and not inst.reads_sequence else 0

    def _lengths(self, layer: TransformerLayer, fixed: int) -> TransformerLayer:
        """A block of a fixed-length stack keeps its length; a cross-attention block of a model with
        one reads that many encoder positions."""
        update = {"fixed_seq_len": fixed} if fixed else {}
        if layer.cross_attention and self.shape.fixed and not fixed:
            update["cross_seq_len"] = self.shape.fixed
        return layer.model_copy(update=update) if update else layer

    def _plain_slot(self, inst: Instance) -> Slot:
        module = self.module(inst)
        kind = norm_kind(module)
        params = self.params[inst.index]
        if kind is not None and "#" not in inst.name:
            layer = NormLayer(name=inst.unit, hidden_size=module.weight.numel(), norm=kind)
            if layer_params(layer) == params:
                return Slot([inst.index], layer, params)
        return Slot([inst.index], None, params, tp_mode=self._tp_mode(inst))

    def _tp_mode(self, inst: Instance) -> TpMode:
        module = self.module(inst)
        unit = self.units.units[inst.unit]
        if unit.kind == "tables":
            sizes = [t.weight.shape[0] for t in module.children()]  # type: ignore[union-attr]
            return "vocab" if max(sizes) * 2 > sum(sizes) else "table"
        if is_table(module):
            return "vocab"
        if unit.kind == "leaf":
            if not isinstance(module, nn.Linear) and type(module).__name__ != "Conv1D":
                return "none"
            mode: TpMode = "row" if self._fed_by_column(inst) else "column"
            self._linear_modes[inst.index] = mode
            return mode
        leaves = [m for m in module.modules() if next(m.children(), None) is None]
        linears = [m for m in leaves if isinstance(m, nn.Linear)]
        heavy = [m for m in leaves if next(m.parameters(), None) is not None and norm_kind(m) is None]
        if linears and len(linears) == len(heavy):
            return "column_row" if len(linears) >= 2 else "column"
        return "none"

    def _fed_by_column(self, inst: Instance) -> bool:
        """The only data input of ``inst`` is a Linear that was given ``column`` (memoised in order)."""
        sources = list(inst.inputs)
        return len(sources) == 1 and self._linear_modes.get(sources[0]) == "column"


def _measure(b: _Builder, slot: Slot, shape: Shape) -> tuple[float, float, float, float, int]:
    """(linear FLOPs, attention FLOPs, memory bytes, saved bytes, op count) of a slot."""
    lin = attn = mem = saved = 0.0
    count = 0
    for k in slot.insts:
        inst = b.insts[k]
        ops = b.ops(inst)
        count += len(ops)
        saved += b.saved(inst)
        for op in ops:
            if op.kind == "attention" or (op.kind == "matmul" and _attention_like(op, shape.context)):
                attn += op.flops
            elif op.kind == "matmul":
                lin += op.flops
            elif op.kind == "memory":
                mem += op.bytes_read + op.bytes_written
    return lin, attn, mem, saved, count


def _is_transformers_module(module: nn.Module) -> bool:
    """A block defined by the ``transformers`` package (``LlamaDecoderLayer`` and kin): the native
    runtime runs the traced model itself, so the block keeps transformers' memory layout
    (``TransformerLayer.transformers_block``), as the block of the same model read from its config.json."""
    return type(module).__module__.split(".")[0] == "transformers"


def _attention_like(op: OpRecord, context: int) -> bool:
    """A product of two activations with the context length on two of its (m, k, n) sides (QKᵀ, PV)."""
    return op.act_act and context > 1 and sum(1 for d in op.dims if d == context) >= 2


def build_layers(units: UnitMap, raw: RawTrace, shape: Shape) -> Built:
    """Spec layers, per-layer measurements and edges for one trace (see the module docstring)."""
    b = _Builder(units, raw, shape)
    slots, tied, positions = b.slots()
    owner = {k: n for n, slot in enumerate(slots) for k in slot.insts}
    edges, outputs = _edges(b, slots, owner, raw)
    shared = shared_saves(b.insts, owner, {n for n, slot in enumerate(slots) if slot.layer is None}, b.rep)
    layers, traces = [], []
    seen: dict[Layer, Layer] = {}
    for n, slot in enumerate(slots):
        first = b.insts[slot.insts[0]] if slot.insts else None
        anchor = first or b.insts[slots[n - 1].insts[0]]  # a surplus layer runs with its block
        fixed = b.fixed(anchor)
        own = shape.own(fixed)
        lin, attn, mem, saved, count = _measure(b, slot, own)
        if _needs_formulas(slot, first):
            lin = layer_fwd_flops(slot.layer, own.tokens, 0)  # type: ignore[arg-type]
            if not attn:  # routing does not touch attention: what ran is kept where it ran
                attn = layer_fwd_flops(slot.layer, own.tokens, own.context) - lin  # type: ignore[arg-type]
        elif slot.layer is None and first is not None and first.stub_of == OPAQUE:
            lin = OPAQUE_FLOPS_PER_PARAM * slot.params * own.tokens
        out = outputs.get(n, 0.0)
        sent = out if any(e.src == n and e.dst > n for e in edges) else 0.0
        layer = slot.layer or _generic(b, slot, n, slots, lin, attn, mem, saved, sent, own, shared)
        if fixed and isinstance(layer, GenericLayer):
            layer = layer.model_copy(update={"fixed_seq_len": fixed})
        layers.append(seen.setdefault(layer, layer))
        traces.append(LayerTrace(
            name=layer.name, kind=layer.kind, modules=tuple(b.insts[k].name for k in slot.insts),
            params=slot.params, fwd_flops=lin, fwd_attn_flops=attn, fwd_mem_bytes=mem,
            activation_bytes=saved, output_bytes=out, ops=count,
            stub_of=first.stub_of if first is not None else None,
        ))
    leftover = sum(p.numel() for p in units.root.parameters()) - sum(s.params for s in slots)
    if leftover > 0:
        layers.append(GenericLayer(name="unused_parameters", params=leftover, fwd_flops_per_token=0.0))
        traces.append(LayerTrace(name="unused_parameters", kind="generic", modules=(), params=leftover,
                                 fwd_flops=0.0, fwd_attn_flops=0.0, fwd_mem_bytes=0.0,
                                 activation_bytes=0.0, output_bytes=0.0, ops=0))
    return Built(layers, traces, edges, tied, positions, trace_notes(b.why, b._recognised, traces))


def _needs_formulas(slot: Slot, first: Instance | None) -> bool:
    """An expert block (its routing needs values) or an opaque one: its FLOPs come from the formulas."""
    layer = slot.layer
    return isinstance(layer, TransformerLayer) and (layer.is_moe or (first is not None and first.stub_of == OPAQUE))


def _generic(b: _Builder, slot: Slot, n: int, slots: list[Slot], lin: float, attn: float, mem: float,
             saved: float, out: float, shape: Shape, shared: SharedSaves) -> GenericLayer:
    """The generic layer of ``slot``; its saved input the layer before saves too, and whether it saves
    its whole output, from ``shared`` (:mod:`planner.intake.trace.shared`)."""
    tokens = float(shape.tokens)
    reps = [b.rep(b.insts[k]).index for k in slot.insts]
    kept_out = sum(shared.outputs[k] for k in reps)
    if slot.passthrough:
        block: TransformerLayer = slots[n - 1].layer  # type: ignore[assignment]
        return GenericLayer(name=f"{block.name}.extra_params", params=slot.params, fwd_flops_per_token=0.0,
                            output_bytes_per_token=float(block.hidden_size * ACT_BYTES))
    inst = b.insts[slot.insts[0]]
    unit = b.units.units[inst.unit]
    name = _pattern(inst.unit) if unit.group >= 0 else (inst.name or "model")
    return GenericLayer(
        name=name, params=slot.params, fwd_flops_per_token=lin / tokens,
        fwd_attn_flops_per_token_per_ctx=attn / (tokens * shape.context),
        fwd_mem_bytes_per_token=mem / tokens, activation_bytes_per_token=saved / tokens,
        output_bytes_per_token=out / tokens, tp_mode=slot.tp_mode,
        sparse_lookup=unit.kind == "tables" or is_table(b.module(inst)),
        selective_saved_bytes_per_token=sum(selective_saved_bytes(b.ops(b.insts[k])) for k in slot.insts) / tokens,
        input_saved_bytes_per_token=sum(shared.inputs[k] for k in reps) / tokens, saves_output=out > 0 and kept_out >= out,
    )


def _edges(b: _Builder, slots: list[Slot], owner: dict[int, int],
           raw: RawTrace) -> tuple[list[LayerEdge], dict[int, float]]:
    """Edges between slots (bytes per token) and each slot's output bytes (per micro-batch)."""
    through = {n - 1: n for n, slot in enumerate(slots) if slot.passthrough}
    flows: dict[tuple[int, int], dict[int, float]] = {}
    for inst in b.insts:
        dst = owner[inst.index]
        for src_inst, storages in inst.inputs.items():
            src = owner[src_inst]
            if src == dst:
                continue
            src = through.get(src, src)
            flows.setdefault((src, dst), {}).update(storages)
    produced: dict[int, dict[int, float]] = {}
    for (src, _), storages in flows.items():
        produced.setdefault(src, {}).update(storages)
    for producer, key, nbytes in raw.outputs:
        if producer in owner:
            produced.setdefault(through.get(owner[producer], owner[producer]), {})[key] = nbytes
    for block, extra in through.items():
        size = sum(produced.get(extra, {}).values())
        flows[(block, extra)] = {-1: size}
        produced.setdefault(block, {})[-1] = size
    tokens = float(b.shape.tokens)
    edges = [LayerEdge(src=s, dst=d, bytes_per_token=sum(v.values()) / tokens)
             for (s, d), v in sorted(flows.items()) if d > s]
    return edges, {n: sum(v.values()) for n, v in produced.items()}
