"""Recognise multi-head latent attention (DeepSeek-V2/V3) in a traced attention module.

MLA (DeepSeek-V2 arXiv:2405.04434 §2.1.2; HF ``modeling_deepseek_v3.py::DeepseekV3Attention``,
torchtitan ``models/deepseek_v3/model/model.py::Attention``) projects the hidden state down to
latents and back up per head, so some of its input projections read a latent rather than the hidden
state. Read, in execution order, with ``h`` the output projection's width and ``a``, ``d_qk`` the
heads and head width of the traced SDPA query (else ``num_heads`` / ``qk_head_dim`` attributes):

- the query projection writes ``a·d_qk``: from ``h`` (no query latent) or from the query latent
  ``d_c'``, which another projection writes from ``h`` (``q_a_proj`` / ``wq_a``);
- the key/value up-projection reads the key/value latent ``d_c`` and writes ``a·(d_h + d_v)``, with
  ``d_v`` the output projection's input over ``a``; the down-projection writes ``d_c + d_h^R`` from
  ``h`` (``kv_a_proj_with_mqa`` / ``wkv_a``), ``d_h^R = d_qk - d_h`` the rotary width.

Anything else (a latent nobody reads, widths that do not add up) is not MLA, and the block is then
planned as a generic layer with the reason.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from planner.intake.trace.record import OpRecord


def _attr(module: nn.Module, names: tuple[str, ...]) -> int | None:
    for name in names:
        value = getattr(module, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def reads_a_latent(projs: list[Any], hidden: int) -> bool:
    """Some input projection of the attention reads something other than the hidden state
    (``projs``: ``planner.intake.trace.recognize._Proj`` leaves, output projection last)."""
    return any(p.d_in != hidden for p in projs[:-1])


def mla_shape(projs: list[Any], module: nn.Module, sdpa: OpRecord | None) -> dict[str, int | None] | str:
    """The MLA fields of :class:`costmodel.specs.TransformerLayer` (and ``num_heads``, ``head_dim``)
    read from an attention module's projections (output projection last), or why they are not MLA."""
    out, ins = projs[-1], projs[:-1]
    hidden = out.d_out
    heads = sdpa.dims[0] if sdpa else _attr(module, ("num_heads", "n_heads", "num_attention_heads"))
    qk = sdpa.dims[1] if sdpa else _attr(module, ("qk_head_dim",))
    if not heads or not qk or out.d_in % heads:
        return "latent attention without a readable head count and query/key head width"
    v = out.d_in // heads
    queries = [p for p in ins if p.d_out == heads * qk]
    ups = [p for p in ins if p.d_in != hidden and p not in queries]
    if len(queries) != 1 or len(ups) != 1 or ups[0].d_out % heads:
        return f"latent attention projections ({_widths(ins)}) are not one query and one key/value up-projection"
    query, kv_up = queries[0], ups[0]
    nope = kv_up.d_out // heads - v
    rope = qk - nope
    q_rank = None if query.d_in == hidden else query.d_in
    downs = [p for p in ins if p.d_in == hidden and p is not query]
    wanted = sorted([kv_up.d_in + rope] + ([q_rank] if q_rank else []))
    if nope <= 0 or rope <= 0 or sorted(p.d_out for p in downs) != wanted:
        return f"latent attention projections ({_widths(ins)}) do not add up to MLA's latents"
    return dict(num_heads=heads, head_dim=qk, kv_lora_rank=kv_up.d_in, q_lora_rank=q_rank,
                qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=v)


def _widths(projs: list[Any]) -> str:
    return ", ".join(f"{p.d_in}->{p.d_out}" for p in projs)
