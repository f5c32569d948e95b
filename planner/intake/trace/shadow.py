"""Real values for the small tensors a model computes from constants alone (attention masks).

On meta and fake tensors nothing has a value, so an attention mask built with ``arange`` and
comparisons (Hugging Face builds its causal masks so) would hide whether attention is causal. The
:class:`Shadows` table re-runs every op whose inputs are all known constants on real CPU tensors
(factory ops such as ``arange`` and ``full`` start the chain; parameters, buffers, uninitialised
``empty`` tensors and anything input-dependent end it), for tensors up to :data:`MAX_ELEMENTS`
elements. :func:`mask_facts` then reads a mask: the share of query-key pairs it allows, and whether
it is exactly causal (lower-triangular), which meshplan counts as half the work.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import _disable_current_modes

MAX_ELEMENTS = 1 << 25
"""Largest tensor given a real value (a 4096 x 4096 mask is 1 << 24)."""

_UNINITIALISED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


class Shadows:
    """CPU values of constant tensors, keyed by the traced tensor object (kept alive by the caller)."""

    max_elements = MAX_ELEMENTS

    def __init__(self) -> None:
        self._values: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def set(self, t: torch.Tensor, real: torch.Tensor) -> None:
        """Give the traced tensor ``t`` the real value ``real`` (a routing decision)."""
        self._values[id(t)] = (t, real)

    def get(self, t: torch.Tensor) -> torch.Tensor | None:
        hit = self._values.get(id(t))
        return hit[1] if hit is not None else None

    def run(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """Give ``out`` real values when every tensor input has one (silently skip otherwise)."""
        name = func._schema.name.split("::")[-1]
        outs = [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]
        if name in _UNINITIALISED or not outs or any(o.numel() > MAX_ELEMENTS for o in outs):
            return
        ins = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        if any(id(x) not in self._values for x in ins):
            return
        real_args, real_kwargs = pytree.tree_map(self._real, (args, kwargs))
        if "device" in real_kwargs:
            real_kwargs["device"] = torch.device("cpu")
        try:
            with _disable_current_modes():
                result = func(*real_args, **real_kwargs)
        except Exception:  # an op that cannot run on these values: the chain just ends here
            return
        real = [x for x in pytree.tree_leaves(result) if isinstance(x, torch.Tensor)]
        if len(real) == len(outs):
            for o, r in zip(outs, real):
                self._values[id(o)] = (o, r)  # holding ``o`` keeps its id unique

    def _real(self, x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return self._values[id(x)][1]
        if isinstance(x, torch.device):
            return torch.device("cpu")
        return x


def mask_facts(mask: torch.Tensor, s_q: int, s_kv: int) -> tuple[float, bool]:
    """(share of query-key pairs allowed, exactly causal) of an SDPA mask's real value.

    A boolean mask allows its True entries; an additive float mask allows entries above half the
    dtype's most negative value (``-inf`` or ``finfo.min`` mark masked pairs).
    """
    with _disable_current_modes():
        if mask.dtype == torch.bool:
            allowed = mask
        else:
            allowed = mask > torch.finfo(mask.dtype).min / 2
        allowed = allowed.expand(*allowed.shape[:-2], s_q, s_kv).reshape(-1, s_q, s_kv)
        tril = torch.ones(s_q, s_kv, dtype=torch.bool).tril(diagonal=s_kv - s_q)
        causal = bool((allowed == tril).all())
        return float(allowed.float().mean()), causal
