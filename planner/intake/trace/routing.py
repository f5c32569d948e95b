"""Representative routing: values for the data-dependent decisions of mixture-of-experts code.

A mixture-of-experts block picks experts with ``topk`` over router scores, then branches on what it
picked: ``nonzero`` / ``torch.where`` for the tokens of each expert, ``.item()`` / ``.tolist()`` for
their counts, ``bincount`` / ``histc`` for load statistics. On meta and fake tensors none of these
have values, so such a block cannot run. Here the trace gives the *indices* of every ``topk`` a real
value, the balanced routing a well-trained load-balanced router approaches (row ``r`` of ``n``
candidates picks ``(r·k + j) mod n``, ``j < k``: every expert gets the same number of tokens), and
computes each data-dependent op from the real values of its inputs
(:class:`planner.intake.trace.shadow.Shadows`). The block then runs its own code, and its FLOPs, bytes and
saved tensors are measured under this routing, as FlopCounterMode measures a real run with the same
assignment (the total expert work is ``tokens x k`` expert MLPs whatever the balance, as long as no
token is dropped).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import _disable_current_modes

from planner.intake.trace.shadow import Shadows

_aten = torch.ops.aten

PICKS = {_aten.topk.default}
"""Ops whose integer output is a routing decision: given the balanced routing of the module docstring."""

DATA_DEPENDENT = {
    _aten.nonzero.default, _aten._local_scalar_dense.default, _aten.masked_select.default,
    _aten.bincount.default, _aten.repeat_interleave.Tensor, _aten._unique2.default,
    _aten.unique_consecutive.default, _aten.unique_dim.default, _aten.is_nonzero.default,
    _aten.nonzero_static.default, _aten.histc.default,
}
"""Ops whose output shape or Python value depends on input values (and ``histc``, which meta tensors
cannot run): computed from real inputs."""


def balanced_indices(shape: tuple[int, ...], dim: int, candidates: int) -> torch.Tensor:
    """Indices of shape ``shape`` (``k`` picks along ``dim``): row r picks ``(r·k + j) mod candidates``."""
    dim = dim % len(shape) if shape else 0
    k = shape[dim] if shape else 1
    moved = list(shape[:dim]) + list(shape[dim + 1:]) + [k]
    rows = 1
    for size in moved[:-1]:
        rows *= size
    picks = (torch.arange(rows).unsqueeze(1) * k + torch.arange(k).unsqueeze(0)) % max(1, candidates)
    return picks.reshape(moved).movedim(-1, dim).contiguous()


def give_routing(func: Any, args: tuple, kwargs: dict, out: Any, shadows: Shadows) -> None:
    """After a ``topk`` ran on traced tensors, give its indices the balanced routing."""
    if func not in PICKS or not isinstance(out, (tuple, list)) or len(out) != 2:
        return
    source = args[0]
    dim = int(args[2]) if len(args) > 2 else int(kwargs.get("dim", -1))
    candidates = int(source.shape[dim]) if source.ndim else 1
    indices = out[1]
    if shadows.get(indices) is None and indices.numel() <= shadows.max_elements:
        with _disable_current_modes():
            real = balanced_indices(tuple(int(d) for d in indices.shape), dim, candidates)
        shadows.set(indices, real.to(indices.dtype))


def resolve(func: Any, args: tuple, kwargs: dict, shadows: Shadows) -> tuple[bool, Any]:
    """(handled, output) of a data-dependent op: computed from real values when every tensor input
    has one; a tensor output is an empty traced tensor (meta or fake, like the inputs) of the real
    output's shape, holding that real value as its shadow. Not handled otherwise."""
    if func is _aten._to_copy.default and str(kwargs.get("device")) == "cpu" and args[0].device.type == "meta":
        real = shadows.get(args[0])  # ``.tolist()`` / ``.cpu()`` of a routing count: its real value
        return (True, real.clone()) if real is not None else (False, None)
    if func is _aten.index.Tensor:
        return _index(args, shadows)
    if func not in DATA_DEPENDENT:
        return False, None
    tensors = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
    if not tensors or any(shadows.get(t) is None for t in tensors):
        return False, None
    device = tensors[0].device
    with _disable_current_modes():
        real_args, real_kwargs = pytree.tree_map_only(torch.Tensor, shadows.get, (args, kwargs))
        real = func(*real_args, **real_kwargs)
    if not isinstance(real, (torch.Tensor, tuple, list)):
        return True, real
    outs = [real] if isinstance(real, torch.Tensor) else list(real)
    traced = [torch.empty(r.shape, dtype=r.dtype, device=device) for r in outs]
    for t, r in zip(traced, outs):
        shadows.set(t, r)
    return True, traced[0] if isinstance(real, torch.Tensor) else type(real)(traced)


def _index(args: tuple, shadows: Shadows) -> tuple[bool, Any]:
    """``aten.index`` (``x[mask]``, ``edge_index[:, mask]``: torch_geometric's ``remove_self_loops``)
    whose indices have real values: run on the real data, or on zeros of the data's shape when the
    data has none (a float feature matrix: only the output's shape is needed). A boolean mask has no
    meta kernel (its output length is the mask's count). Not handled when an index has no value."""
    data, indices = args[0], list(args[1])
    given = [i for i in indices if i is not None]
    if not given or any(shadows.get(i) is None for i in given):
        return False, None
    real_data = shadows.get(data)
    if real_data is None and data.numel() > shadows.max_elements:
        return False, None
    with _disable_current_modes():
        stand_in = real_data if real_data is not None else torch.zeros(data.shape, dtype=data.dtype)
        try:
            real = _aten.index.Tensor(stand_in, [shadows.get(i) if i is not None else None for i in indices])
        except (IndexError, RuntimeError):  # out of range on these values: the op itself runs (and says so)
            return False, None
        traced = torch.empty(real.shape, dtype=real.dtype, device=data.device)
    if real_data is not None:
        shadows.set(traced, real)
    return True, traced
