"""Recognise a transformer block in a traced unit and describe it as a :class:`TransformerLayer`.

What is read, and from where:

- Attention (:func:`planner.intake.trace.units.attention_modules`): in execution order, the last projection
  of an attention module is its output projection (row-parallel under TP), the others are its input
  projections (column-parallel: Q, K, V, fused or not). ``hidden = out.out_features``,
  ``h_q = out.in_features``; the K/V width is ``(sum of input widths - h_q) / 2``. The head width is
  the last dimension of the traced SDPA query, else a ``head_dim``-like attribute, else
  ``h_q / num_heads``. ``nn.MultiheadAttention`` is read from its own fields. A second attention
  module is cross-attention.
- MLP: the other projections. Three (two reading the hidden state) are a gated MLP (SwiGLU); two are
  a plain MLP, gated when the first is twice as wide as the second's input (fused gate/up). ReLU when
  a ``relu`` ran in the block, else GELU (SiLU costs the same).
- Mixture of experts: a ModuleList of equal expert MLPs, or fused expert weights (3-D parameters with
  the expert count first, as in Hugging Face's ``MixtralExperts``); the router is the projection whose
  width is the expert count; other projections form a shared expert. Top-k is read from a
  ``top_k`` / ``num_experts_per_tok`` / ``moe_top_k`` / ``topk`` / ``num_selected_experts`` attribute;
  **when no such attribute exists, top-2 is assumed** (Mixtral, GShard).
- Norm kind from the first norm (:func:`planner.intake.trace.units.norm_kind`); biases from the
  projections; the attention layout (sliding window, chunk) per layer by
  :mod:`planner.intake.trace.layout`; causal from the traced SDPA ``is_causal``, else an ``is_causal`` attribute, else
  False under an ``encoder`` path, else True in a language model (a decoder) and False otherwise.

The block's parameters must be at least what ``costmodel.flops.layer_params`` counts for the layer;
per-head q/k norms (Qwen3: two ``head_dim`` weights) are read from a surplus of exactly that; any
other surplus (T5's relative position table) is returned for a small generic layer. Multi-head
latent attention (an input projection reads a latent, not the hidden state):
:mod:`planner.intake.trace.recognize_mla`.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from costmodel.params import layer_params, norm_params
from costmodel.specs import TransformerLayer
from planner.intake.trace.layout import block_layout
from planner.intake.trace.record import OpRecord
from planner.intake.trace.recognize_mla import mla_shape, reads_a_latent
from planner.intake.trace.units import attention_modules, count_params, linear_dims, module_signature, norm_kind

DEFAULT_TOP_K = 2
"""Experts per token assumed when a MoE block names no top-k (Mixtral and GShard route to 2)."""

_TOP_K_ATTRS = ("top_k", "num_experts_per_tok", "moe_top_k", "topk", "num_selected_experts")
_HEAD_DIM_ATTRS = ("head_dim", "head_size", "attention_head_size", "d_kv", "key_value_proj_dim")
_HEADS_ATTRS = ("num_heads", "n_heads", "num_attention_heads", "n_head", "heads")


@dataclass(frozen=True)
class _Proj:
    name: str
    module: nn.Module
    d_in: int
    d_out: int

    @property
    def bias(self) -> bool:
        return self.module._parameters.get("bias") is not None


@dataclass(frozen=True)
class _Attention:
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    qkv_bias: bool
    out_bias: bool
    mla: dict | None = None
    """Multi-head latent attention's fields (:func:`planner.intake.trace.recognize_mla.mla_shape`)."""


class _Block:
    """Look-ups into one block module and the ops it ran (execution order)."""

    def __init__(self, module: nn.Module, path: str, ops: list[OpRecord]) -> None:
        self.module = module
        self.ops = ops
        names = [name for name, _ in module.named_modules()]
        prefix = f"{path}." if path else ""
        self.order: dict[str, int] = {}
        for i, op in enumerate(ops):
            rel = op.module[len(prefix):] if op.module.startswith(prefix) else ""
            self.order.setdefault(rel, i)
        base = len(ops)
        for i, name in enumerate(names):
            self.order.setdefault(name, base + i)

    def projections(self, root: str) -> list[_Proj]:
        """Linear-like leaves under ``root`` (relative path), in execution order."""
        found = []
        prefix = f"{root}." if root else ""
        for name, m in self.module.named_modules():
            dims = linear_dims(m)
            if dims is not None and (not root or name.startswith(prefix)):
                found.append(_Proj(name, m, dims[0], dims[1]))
        return sorted(found, key=lambda p: self.order[p.name])

    def ops_under(self, root: str, path: str) -> list[OpRecord]:
        full = f"{path}.{root}" if path else root
        return [op for op in self.ops if op.module == full or op.module.startswith(f"{full}.")]


def _int_attr(modules: list[nn.Module], names: tuple[str, ...]) -> int | None:
    for m in modules:
        for name in names:
            value = getattr(m, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def _sdpa_for(block: _Block, attn: list[tuple[str, nn.Module]], index: int, path: str) -> OpRecord | None:
    """The traced SDPA call of the ``index``-th attention module: one under its path, else the
    ``index``-th SDPA call of the block (attention modules whose caller runs the kernel)."""
    name = attn[index][0]
    under = [op for op in block.ops_under(name, path) if op.kind == "attention"]
    if under:
        return under[0]
    everywhere = [op for op in block.ops if op.kind == "attention"]
    return everywhere[index] if len(everywhere) == len(attn) else None


def _attention(block: _Block, name: str, module: nn.Module, sdpa: OpRecord | None) -> _Attention | str | None:
    if isinstance(module, nn.MultiheadAttention):
        e = module.embed_dim
        return _Attention(e, module.num_heads, module.num_heads, e // module.num_heads,
                          module.in_proj_bias is not None, module.out_proj.bias is not None)
    projs = block.projections(name)
    if len(projs) < 2:
        return None
    out, ins = projs[-1], projs[:-1]
    hidden, q_width = out.d_out, out.d_in
    if reads_a_latent(projs, hidden):
        mla = mla_shape(projs, module, sdpa)
        if isinstance(mla, str):
            return mla
        heads, head_dim = mla.pop("num_heads"), mla.pop("head_dim")
        return _Attention(hidden, heads, heads, head_dim, any(p.bias for p in ins), out.bias, mla)  # type: ignore[arg-type]
    head_dim = sdpa.dims[1] if sdpa else _int_attr([module], _HEAD_DIM_ATTRS)
    if head_dim is None:
        heads = _int_attr([module, block.module], _HEADS_ATTRS)
        head_dim = q_width // heads if heads and q_width % heads == 0 else None
    kv_twice = sum(p.d_out for p in ins) - q_width
    if head_dim is None or q_width % head_dim or kv_twice <= 0 or kv_twice % (2 * head_dim):
        return None
    return _Attention(hidden, q_width // head_dim, kv_twice // (2 * head_dim), head_dim,
                      any(p.bias for p in ins), out.bias)


def _mlp_shape(projs: list[_Proj], hidden: int) -> tuple[int, bool] | None:
    """(ffn width, gated) of an MLP made of ``projs``, or None."""
    down = [p for p in projs if p.d_out == hidden and p.d_in != hidden]
    up = [p for p in projs if p.d_in == hidden]
    if len(projs) == 3 and len(down) == 1 and len(up) == 2:
        f = down[0].d_in
        return (f, True) if all(p.d_out == f for p in up) else None
    if len(projs) == 2 and len(down) == 1 and len(up) == 1:
        f, width = down[0].d_in, up[0].d_out
        if width == f:
            return f, False
        if width == 2 * f:
            return f, True
    if len(projs) == 2 and all(p.d_in == hidden and p.d_out == hidden for p in projs):
        return hidden, False
    return None


@dataclass(frozen=True)
class _Moe:
    experts: int
    ffn: int
    gated: bool
    bias: bool
    owned: frozenset[str]
    """Relative names of the modules inside the experts (not part of the dense/shared MLP)."""


def _expert_list(block: _Block, hidden: int, skip: tuple[str, ...]) -> _Moe | None:
    for name, m in block.module.named_modules():
        if not name or name.startswith(skip) or not isinstance(m, (nn.ModuleList, nn.ModuleDict)):
            continue
        children = list(m.named_children())
        if len(children) < 2 or len({module_signature(c) for _, c in children}) != 1:
            continue
        first = f"{name}.{children[0][0]}"
        projs = [p for p in block.projections(first)]
        shape = _mlp_shape(projs, hidden)
        if shape is None:
            continue
        owned = frozenset(n for n, _ in block.module.named_modules() if n == name or n.startswith(f"{name}."))
        return _Moe(len(children), shape[0], shape[1], all(p.bias for p in projs), owned)
    return None


def _fused_experts(block: _Block, hidden: int, skip: tuple[str, ...]) -> _Moe | None:
    for name, m in block.module.named_modules():
        if name.startswith(skip):
            continue
        cubes = [p for p in m._parameters.values() if p is not None and p.ndim == 3]
        if len(cubes) < 2 or len({int(p.shape[0]) for p in cubes}) != 1:
            continue
        experts = int(cubes[0].shape[0])
        per = sum(p.numel() for p in cubes) // experts
        dims = {int(d) for p in cubes for d in p.shape[1:]}
        if len(cubes) == 3 and len({p.numel() for p in cubes}) == 1 and per % (3 * hidden) == 0:
            ffn, gated = per // (3 * hidden), True  # separate gate, up and down cubes (torchtitan)
        elif per % (3 * hidden) == 0 and 2 * (per // (3 * hidden)) in dims:
            ffn, gated = per // (3 * hidden), True
        elif per % (2 * hidden) == 0:
            ffn, gated = per // (2 * hidden), False
        else:
            continue
        owned = frozenset(n for n, _ in block.module.named_modules() if n == name or n.startswith(f"{name}."))
        return _Moe(experts, ffn, gated, False, owned)
    return None


def _causal(sdpa: OpRecord | None, self_module: nn.Module, path: str, lm: bool, cross: bool) -> bool:
    if sdpa is not None and sdpa.causal:
        return True
    flag = getattr(self_module, "is_causal", None)
    if isinstance(flag, bool):
        return flag
    if cross:
        return True
    if "encoder" in path.lower().split("."):
        return False
    return lm


def _keys_read(ops: list[OpRecord], sdpa: OpRecord | None, context: int | None) -> int | None:
    """Keys per query of a block's attention when they are not the traced ``context``, else None:
    the SDPA call's key count, or, for scores written out as matmuls (timm's Swin by default), the
    last side of the first product of two activations that has no two sides equal to the context."""
    if context is None:
        return None
    if sdpa is not None:
        return sdpa.dims[3] if sdpa.dims[3] != context else None
    products = [op for op in ops if op.kind == "matmul" and op.act_act and op.dims]
    if products and not any(sum(1 for d in op.dims if d == context) >= 2 for op in products):
        return products[0].dims[2]
    return None


def _dropout(module: nn.Module, attn_modules: list[nn.Module]) -> bool:
    if any(isinstance(m, nn.Dropout) and m.p > 0 for m in module.modules()):
        return True
    for m in attn_modules:
        for name in ("attention_dropout", "dropout", "attn_dropout"):
            value = getattr(m, name, None)
            if isinstance(value, float) and value > 0:
                return True
    return False


def _head_norms(module: nn.Module, head_dim: int) -> int:
    """Norm modules of a block normalising one head's width (Qwen3's ``q_norm`` and ``k_norm``)."""
    return sum(1 for m in module.modules() if norm_kind(m) is not None
               and getattr(getattr(m, "weight", None), "numel", lambda: 0)() == head_dim)


def _attention_by_order(block: _Block) -> tuple[_Attention, tuple[str, ...], OpRecord] | None:
    """Attention with no attention-named module (a helper method on the block, heads read from a
    reshape): the projections that ran before the block's single SDPA call are its inputs, the first
    one after it is the output projection; the head width is the SDPA query's."""
    calls = [i for i, op in enumerate(block.ops) if op.kind == "attention"]
    if len(calls) != 1:
        return None
    sdpa = block.ops[calls[0]]
    projs = block.projections("")
    before = [p for p in projs if block.order[p.name] < calls[0]]
    after = [p for p in projs if block.order[p.name] > calls[0]]
    if not before or not after:
        return None
    out, head_dim = after[0], sdpa.dims[1]
    q_width = out.d_in
    kv_twice = sum(p.d_out for p in before) - q_width
    if q_width % head_dim or kv_twice <= 0 or kv_twice % (2 * head_dim):
        return None
    facts = _Attention(out.d_out, q_width // head_dim, kv_twice // (2 * head_dim), head_dim,
                       any(p.bias for p in before), out.bias)
    return facts, tuple(p.name for p in (*before, out)), sdpa


def _attention_facts(block: _Block, module: nn.Module, path: str) -> tuple[list[_Attention], tuple[str, ...], list[OpRecord | None], nn.Module] | str:
    """(attention facts, names of their modules, SDPA calls, the self-attention module) or why not."""
    attn = sorted(attention_modules(module), key=lambda nm: block.order[nm[0]])
    if not attn:
        found = _attention_by_order(block)
        if found is None:
            return "no attention submodule, and not one SDPA call between projections"
        facts, names, sdpa = found
        return [facts], names, [sdpa], module
    if len(attn) > 2:
        return f"{len(attn)} attention submodules (one self- and one cross-attention are understood)"
    sdpa = [_sdpa_for(block, attn, i, path) for i in range(len(attn))]
    facts = [_attention(block, n, m, op) for (n, m), op in zip(attn, sdpa)]
    why = next((f for f in facts if isinstance(f, str)), None)
    if why is not None:
        return why
    if any(f is None for f in facts):
        return "attention projections do not give whole heads (head width not found)"
    if len({f.hidden for f in facts}) != 1:  # type: ignore[union-attr]
        return "self- and cross-attention project to different widths"
    return facts, tuple(n for n, _ in attn), sdpa, attn[0][1]  # type: ignore[return-value]


def recognize_block(module: nn.Module, path: str, ops: list[OpRecord], *, name: str,
                    lm: bool, context: int | None = None) -> tuple[TransformerLayer, int] | str:
    """The block at ``path`` as a TransformerLayer and its surplus parameters, or why it is not one
    (it is then planned as a generic layer from its traced ops).

    ``ops`` are the block's own traced ops (empty for an opaque block); ``lm`` says the model is a
    language model (token embedding and vocabulary head), whose blocks default to causal. A block
    whose self-attention reads other than ``context`` keys (the traced context: windows of a Swin
    image) is not a TransformerLayer, whose attention spans the context.
    """
    block = _Block(module, path, ops)
    found = _attention_facts(block, module, path)
    if isinstance(found, str):
        return found
    facts, skip, sdpa, self_module = found
    keys = _keys_read(ops, sdpa[0], context)
    if keys is not None:
        return (f"its attention reads {keys} keys per query (windows), not the "
                f"{context}-token context a transformer layer attends over")
    main, h = facts[0], facts[0].hidden
    moe = _expert_list(block, h, skip) or _fused_experts(block, h, skip)
    rest = [p for p in block.projections("") if not p.name.startswith(skip)
            and not (moe and p.name in moe.owned)]
    router = [p for p in rest if moe and p.d_out == moe.experts]
    mlp = [p for p in rest if p not in router and p.d_out > 1]  # a 1-wide projection gates a shared expert
    shape = _mlp_shape(mlp, h) if mlp else None
    widths = ", ".join(f"{p.d_in}->{p.d_out}" for p in mlp) or "none"
    if moe is None and shape is None:
        return f"MLP projections ({widths}) are not a plain, gated or fused gate-up MLP of width {h}"
    if moe is not None and len(router) != 1:
        return f"{len(router)} projections to the {moe.experts} experts (one router expected)"
    if moe is not None and mlp and shape is None:
        return f"shared-expert projections ({widths}) are not an MLP of width {h}"
    ffn, gated = (moe.ffn, moe.gated) if moe else shape  # type: ignore[misc]
    cross = len(facts) == 2
    layout = block_layout(module, self_module)
    layer = TransformerLayer(
        name=name, hidden_size=h, num_heads=main.heads, num_kv_heads=main.kv_heads,
        head_dim=main.head_dim, ffn_hidden_size=ffn,
        ffn_act=_ffn_act(ops, gated),
        num_experts=moe.experts if moe else 0,
        moe_top_k=(_int_attr(list(module.modules()), _TOP_K_ATTRS) or DEFAULT_TOP_K) if moe else 0,
        shared_expert_ffn_hidden_size=shape[0] if moe and shape else 0,
        norm=next((k for k in map(norm_kind, module.modules()) if k is not None), "layernorm"),
        qkv_bias=main.qkv_bias, out_bias=main.out_bias,
        mlp_bias=(moe.bias if moe else all(p.bias for p in mlp)),
        causal=_causal(sdpa[0], self_module, path, lm, cross=cross),
        cross_attention=cross,
        dropout=_dropout(module, [m for n, m in module.named_modules() if n in skip]),
        sliding_window=layout.sliding_window, attention_chunk=layout.attention_chunk,
        **(main.mla or {}),
    )
    surplus = count_params(module) - layer_params(layer)
    if surplus and surplus == 2 * norm_params(layer.norm, layer.head_dim) and _head_norms(module, layer.head_dim) == 2:
        layer, surplus = layer.model_copy(update={"qk_norm": True}), 0  # per-head q/k norms (Qwen3)
    if surplus < 0 and layer.qkv_bias:  # some input projections lack a bias (Whisper's k_proj): the
        layer = layer.model_copy(update={"qkv_bias": False})  # others' biases become surplus parameters
        surplus = count_params(module) - layer_params(layer)
    if surplus < 0:
        return f"holds {-surplus:,} fewer parameters than the transformer layout read from it"
    return layer, surplus


def _ffn_act(ops: list, gated: bool) -> str:
    """The MLP activation the block's traced ops show: ``swiglu`` when gated; ``relu`` (``relu2``
    squared: the op after the ReLU is a ``pow``); ``gelu_tanh``
    where the tanh GELU runs op by op (a ``tanh`` beside a ``pow``: transformers'
    ``NewGELUActivation``, GPT-2's ``gelu_new``); else ``gelu`` (one kernel)."""
    if gated:
        return "swiglu"
    names = [op.op for op in ops]
    relu = [i for i, n in enumerate(names) if n.endswith(("relu", "relu_"))]
    if relu:
        after = [op.op for op in ops[relu[0] + 1:] if op.kind != "view"][:1]
        return "relu2" if after and after[0].endswith("pow") else "relu"  # torch.square runs as aten.pow
    if any(n.endswith("tanh") for n in names) and any(n.endswith("pow") for n in names):
        return "gelu_tanh"
    return "gelu"
