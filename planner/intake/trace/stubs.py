"""Trace one block of each repeated group, and stand in for the others.

While a trace runs, every unit of a repeat group (:mod:`planner.intake.trace.units`) gets a temporary
``forward``: the first call with a given input signature runs the real block (the *representative*);
later calls of the other members with the same signature call the ``meshplan::block_stub`` op
instead, which only makes fresh, empty output tensors shaped like the representative's. So the
traced op count, and the tracing time, does not grow with depth. The stub is a real operator: it
appears in ``torch.export`` graphs and in eager dispatch alike, consuming the block's tensor inputs
and producing its outputs, so the data flow between layers stays exact.

An *opaque* unit (a transformer block whose forward cannot run without data, such as top-k expert
routing) is stubbed on every call, its output shaped like its first tensor input (the hidden states);
its layer is then described from its module structure alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn
from torch.utils import _pytree as pytree

STUB_OP_NAME = "meshplan.block_stub"
OPAQUE = "<opaque>"
"""The representative path written in an opaque unit's template."""

_MISSING = object()


def _outputs_from_template(inputs: list[torch.Tensor], template: str) -> list[torch.Tensor]:
    """Fresh empty tensors described by ``template`` (``rep|device|dtype:d0,d1;dtype:...``)."""
    _, device, specs = template.split("|", 2)
    outs = []
    for spec in filter(None, specs.split(";")):
        dtype_name, _, dims = spec.partition(":")
        shape = [int(d) for d in dims.split(",") if d]
        outs.append(torch.empty(shape, dtype=getattr(torch, dtype_name), device=device))
    return outs


@torch.library.custom_op("meshplan::block_stub", mutates_args=())
def block_stub(inputs: list[torch.Tensor], template: str) -> list[torch.Tensor]:
    """Outputs of a repeated (or opaque) block, without running it: see the module docstring."""
    return _outputs_from_template(inputs, template)


@block_stub.register_fake
def _block_stub_fake(inputs: list[torch.Tensor], template: str) -> list[torch.Tensor]:
    return _outputs_from_template(inputs, template)


def _stub_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.count = len(inputs[0])


def _stub_backward(ctx: Any, grads: Any) -> tuple[list[None], None]:
    return [None] * ctx.count, None


block_stub.register_autograd(_stub_backward, setup_context=_stub_setup)


def template_rep(template: str) -> str:
    """The representative's module path written in a stub template (:data:`OPAQUE` for opaque units)."""
    return template.split("|", 1)[0]


def _template(rep: str, device: torch.device, tensors: list[torch.Tensor]) -> str:
    specs = ";".join(
        f"{str(t.dtype).removeprefix('torch.')}:{','.join(str(int(d)) for d in t.shape)}" for t in tensors
    )
    return f"{rep}|{device.type}|{specs}"


def input_signature(args: tuple, kwargs: dict) -> tuple:
    """Shapes and dtypes of the tensor inputs, values of plain ones (what must match to reuse a trace)."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    sig: list[object] = [str(spec)]
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            sig.append((tuple(leaf.shape), leaf.dtype))
        elif leaf is None or isinstance(leaf, (bool, int, float, str)):
            sig.append(leaf)
        else:
            sig.append(type(leaf).__qualname__)
    return tuple(sig)


@dataclass
class _Rep:
    """The representative call of a group for one input signature."""

    path: str
    spec: pytree.TreeSpec
    leaves: list[Any]


class StubInstaller:
    """Context manager: temporary ``forward`` overrides for repeated and opaque units.

    ``groups`` maps a repeat-group id to its unit paths; ``opaque`` names units always stubbed.
    The overrides are removed on exit, leaving the modules as they were.
    """

    def __init__(self, modules: dict[str, nn.Module], groups: dict[int, list[str]], opaque: set[str]) -> None:
        self._modules = modules
        self._groups = groups
        self._opaque = opaque
        self._reps: dict[tuple, _Rep] = {}
        self._saved: dict[str, object] = {}

    def __enter__(self) -> StubInstaller:
        self._reps.clear()
        targets = {p: g for g, paths in self._groups.items() for p in paths}
        targets.update({p: -1 for p in self._opaque})
        for path, group in targets.items():
            module = self._modules[path]
            self._saved[path] = module.__dict__.get("forward", _MISSING)
            module.forward = self._override(path, group, module)
        return self

    def __exit__(self, *exc: object) -> None:
        for path, saved in self._saved.items():
            module = self._modules[path]
            if saved is _MISSING:
                del module.forward
            else:
                module.forward = saved
        self._saved.clear()

    def _override(self, path: str, group: int, module: nn.Module) -> Callable[..., Any]:
        original = module.forward
        opaque = path in self._opaque

        def forward(*args: Any, **kwargs: Any) -> Any:
            if opaque:
                return _opaque_call(module, args, kwargs)
            key = (group, input_signature(args, kwargs))
            rep = self._reps.get(key)
            if rep is None or rep.path == path:
                out = original(*args, **kwargs)
                if rep is None:
                    leaves, spec = pytree.tree_flatten(out)
                    self._reps[key] = _Rep(path, spec, leaves)
                return out
            return _stub_call(module, rep, args, kwargs)

        return forward


def _stub_inputs(module: nn.Module, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The block's tensor inputs, plus one of its parameters so outputs require grad like the real ones."""
    tensors = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
    param = next(module.parameters(), None)
    return tensors + ([param] if param is not None else [])


def _stub_call(module: nn.Module, rep: _Rep, args: tuple, kwargs: dict) -> Any:
    inputs = _stub_inputs(module, args, kwargs)
    tensors = [x for x in rep.leaves if isinstance(x, torch.Tensor)]
    device = tensors[0].device if tensors else inputs[0].device
    outs = iter(torch.ops.meshplan.block_stub(inputs, _template(rep.path, device, tensors)))
    leaves = [next(outs) if isinstance(x, torch.Tensor) else x for x in rep.leaves]
    return pytree.tree_unflatten(leaves, rep.spec)


def _opaque_call(module: nn.Module, args: tuple, kwargs: dict) -> torch.Tensor:
    inputs = _stub_inputs(module, args, kwargs)
    first = inputs[0]
    return torch.ops.meshplan.block_stub(inputs, _template(OPAQUE, first.device, [first]))[0]
