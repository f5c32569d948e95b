"""Run a model once under the recorder: eager on ``meta``, else ``torch.export``, else FakeTensorMode.

Three ways to execute the forward pass without memory or data, tried in order (``method="auto"``):

1. ``meta``: the module runs eagerly on meta tensors; module hooks say which module owns each op.
   The fastest, and the one where representative routing (:mod:`planner.intake.trace.routing`) and the
   real values of constant tensors (:mod:`planner.intake.trace.shadow`) answer data-dependent questions.
2. ``export``: ``torch.export.export(..., strict=False)`` captures the ATen graph of the module on the
   meta device; the graph is then interpreted node by node under the recorder, each node owned by the
   last entry of its ``nn_module_stack``.
3. ``fake``: as ``meta`` but under ``FakeTensorMode`` with CPU fake tensors, for code that checks
   devices or calls kernels with no meta implementation.

Repeated units are stubbed during all three (:mod:`planner.intake.trace.stubs`). When a transformer-like
block cannot run without data (top-k expert routing reads values), it is made opaque and the run is
retried. When every way fails, :class:`planner.errors.InputError` names the module and op that failed.
"""

from __future__ import annotations

import io
import logging
import warnings
from contextlib import ExitStack, contextmanager, redirect_stderr
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch import fx, nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils import _pytree as pytree

from planner.errors import InputError
from planner.intake.trace.record import DispatchRecorder, Instance, Recorder, SdpaInterceptor, flop_counter
from planner.intake.trace.stubs import StubInstaller
from planner.intake.trace.units import UnitMap

METHODS = ("meta", "export", "fake")
CONFIG_HINT = ("a preset, or a config.json read without --trace where meshplan knows its family "
               "(meshplan list models), plans without tracing")


@dataclass
class RawTrace:
    """What one successful run recorded."""

    instances: list[Instance]
    method: str
    opaque: frozenset[str]
    outputs: list[tuple[int, int, float]]
    """(producer instance, storage, bytes) of the model's data outputs."""
    unread_params: int
    """Container-owned parameters no op read."""


@dataclass
class _Failure:
    path: str
    op: str | None
    message: str


class _TraceError(Exception):
    def __init__(self, failure: _Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class _PathHooks:
    """Module hooks that keep ``recorder.path`` on the innermost running module (eager runs)."""

    def __init__(self, modules: dict[str, nn.Module], recorder: Recorder) -> None:
        self._modules = modules
        self._rec = recorder
        self._stack: list[str] = []
        self._handles: list[Any] = []

    def __enter__(self) -> _PathHooks:
        for path, module in self._modules.items():
            self._handles.append(module.register_forward_pre_hook(self._enter(path)))
            self._handles.append(module.register_forward_hook(self._exit()))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()

    def _enter(self, path: str) -> Any:
        def hook(module: nn.Module, args: Any) -> None:
            self._stack.append(path)
            self._rec.path = path

        return hook

    def _exit(self) -> Any:
        def hook(module: nn.Module, args: Any, out: Any) -> None:
            self._stack.pop()
            self._rec.path = self._stack[-1] if self._stack else ""

        return hook


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _node_path(node: fx.Node) -> str:
    stack = node.meta.get("nn_module_stack")
    return list(stack.values())[-1][0] if stack else ""


class _Interpreter(fx.Interpreter):
    """Runs an exported graph node by node, telling the recorder each node's owning module."""

    def __init__(self, gm: fx.GraphModule, recorder: Recorder) -> None:
        super().__init__(gm)
        self._rec = recorder

    def run_node(self, n: fx.Node) -> Any:
        self._rec.path = _node_path(n)
        if n.op == "call_function" and n.target is torch.ops.aten.scaled_dot_product_attention.default:
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            return self._rec.sdpa(*args, **kwargs)
        return super().run_node(n)


class _Run:
    """One attempt: a method, an opaque set; builds the recorder and executes."""

    def __init__(self, module: nn.Module, units: UnitMap, args: tuple, kwargs: dict, opaque: set[str],
                 values: list[tuple[torch.Tensor, torch.Tensor]] = ()) -> None:  # type: ignore[assignment]
        self.values = values
        self.sequence: list[bool] | None = None
        """Per tensor input, whether its length follows ``seq_len`` (None: all do)."""
        self.module = module
        self.units = units
        self.args = args
        self.kwargs = kwargs
        self.opaque = opaque

    def _loose_params(self) -> list[torch.Tensor]:
        """Parameters owned directly by modules outside every unit (a ViT's class token)."""
        in_units = {id(p) for path in self.units.units for p in self.units.modules[path].parameters()}
        loose = []
        for path, module in self.units.modules.items():
            if self.units.resolve(path) is None:
                # a parameter a unit also holds (BERT's MLM bias is its decoder's bias) is counted there
                loose.extend(p for p in module._parameters.values() if p is not None and id(p) not in in_units)
        return loose

    def _recorder(self, inputs: list[torch.Tensor]) -> Recorder:
        tensors = list(self.module.parameters()) + list(self.module.buffers())
        sequence = None if self.sequence is None else [t for t, s in zip(inputs, self.sequence) if s]
        recorder = Recorder(self.units, tensors, self._loose_params(), inputs, sequence)
        for traced, real in self.values:
            recorder.shadows.set(traced, real)
        return recorder

    def _stubs(self) -> StubInstaller:
        return StubInstaller(self.units.modules, self.units.groups(), self.opaque)

    def _record(self, recorder: Recorder, body: Any) -> Any:
        """Run ``body()`` under the flop counter, the recorder and the saved-tensor hooks."""
        counter = flop_counter()
        with ExitStack() as stack:
            stack.enter_context(torch.enable_grad())
            stack.enter_context(counter)
            stack.enter_context(DispatchRecorder(recorder, counter))
            stack.enter_context(SdpaInterceptor(recorder))
            stack.enter_context(torch.autograd.graph.saved_tensors_hooks(recorder.on_saved, lambda t: t))
            return body()

    def _finish(self, recorder: Recorder, out: Any, method: str) -> RawTrace:
        tensors = [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]
        return RawTrace(recorder.instances, method, frozenset(self.opaque), recorder.data_storages(tensors),
                        recorder.unread_loose_params())

    def _guard(self, recorder: Recorder, body: Any) -> Any:
        try:
            return body()
        except InputError:
            raise
        except Exception as exc:  # any failure of user code or of an op: reported, then retried
            raise _TraceError(_Failure(recorder.path, recorder.in_flight, _one_line(exc))) from exc

    def eager(self) -> RawTrace:
        """Method ``meta``: run the module on meta tensors."""
        inputs = [x for x in pytree.tree_leaves((self.args, self.kwargs)) if isinstance(x, torch.Tensor)]
        rec = self._recorder(inputs)
        with self._stubs(), _PathHooks(self.units.modules, rec):
            out = self._guard(rec, lambda: self._record(rec, lambda: self.module(*self.args, **self.kwargs)))
        return self._finish(rec, out, "meta")

    def fake(self) -> RawTrace:
        """Method ``fake``: run the module under FakeTensorMode on CPU fake tensors."""
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        with _fake_swap(self.module, mode):
            with mode:
                args, kwargs = pytree.tree_map_only(torch.Tensor, _fake_like, (self.args, self.kwargs))
            inputs = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
            rec = self._recorder(inputs)
            with self._stubs(), _PathHooks(self.units.modules, rec), mode:
                out = self._guard(rec, lambda: self._record(rec, lambda: self.module(*args, **kwargs)))
            return self._finish(rec, out, "fake")

    def export(self) -> RawTrace:
        """Method ``export``: capture with ``torch.export`` (non-strict), then interpret the graph."""
        probe = Recorder(self.units, [], [], [])
        with self._stubs(), _PathHooks(self.units.modules, probe), _quiet():
            ep = self._guard(probe, lambda: torch.export.export(self.module, self.args, self.kwargs, strict=False))
        flat = _placeholders(ep, self.module, self.args, self.kwargs)
        user = [x for x in pytree.tree_leaves((self.args, self.kwargs)) if isinstance(x, torch.Tensor)]
        rec = self._recorder(user)
        interpreter = _Interpreter(ep.graph_module, rec)
        out = self._guard(rec, lambda: self._record(rec, lambda: interpreter.run(*flat, enable_io_processing=False)))
        return self._finish(rec, out, "export")


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence what ``torch.export`` prints on failure (its partial graph, its error log): a failed
    export is not the user's error here, the next method is tried and only a final failure reported."""
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        with redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def _placeholders(ep: Any, module: nn.Module, args: tuple, kwargs: dict) -> list[Any]:
    """Values for the exported graph's placeholders: the module's own tensors and the user inputs."""
    from torch.export.graph_signature import InputKind

    user = iter(pytree.tree_leaves((args, kwargs)))
    values: list[Any] = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.PARAMETER:
            values.append(module.get_parameter(spec.target))
        elif spec.kind == InputKind.BUFFER:
            values.append(module.get_buffer(spec.target))
        elif spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
            values.append(ep.constants[spec.target])
        elif spec.kind == InputKind.USER_INPUT:
            values.append(next(user))
        else:
            raise _TraceError(_Failure("", None, f"unsupported exported input kind {spec.kind}"))
    return values


def _fake_like(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(t.shape, dtype=t.dtype, device="cpu")


class _fake_swap:
    """Temporarily replace every parameter and buffer by a CPU fake tensor (ties kept)."""

    def __init__(self, module: nn.Module, mode: FakeTensorMode) -> None:
        self._module = module
        self._mode = mode
        self._undo: list[tuple[dict, str, Any]] = []

    def __enter__(self) -> None:
        made: dict[int, Any] = {}
        with self._mode:
            for m in self._module.modules():
                for table, wrap in ((m._parameters, True), (m._buffers, False)):
                    for name, t in list(table.items()):
                        if t is None:
                            continue
                        if id(t) not in made:
                            fake = _fake_like(t)
                            made[id(t)] = nn.Parameter(fake, requires_grad=t.requires_grad) if wrap else fake
                        self._undo.append((table, name, t))
                        table[name] = made[id(t)]

    def __exit__(self, *exc: object) -> None:
        for table, name, t in reversed(self._undo):
            table[name] = t
        self._undo.clear()


def _enclosing_block(units: UnitMap, path: str) -> str | None:
    unit = units.resolve(path)
    return unit.path if unit is not None and unit.kind == "block" else None


def _group_of(units: UnitMap, path: str) -> set[str]:
    """``path`` and the other members of its repeat group (they fail alike)."""
    group = units.units[path].group
    if group < 0:
        return {path}
    return {p for p, u in units.units.items() if u.group == group}


def _attempts(method: str, module: nn.Module | None = None) -> Iterator[str]:
    if method == "auto":
        # nn.MultiheadAttention calls SDPA inside its own torch-function dispatch, where an eager
        # interceptor cannot see it; the exported graph shows the call: export goes first there.
        mha = module is not None and any(isinstance(m, nn.MultiheadAttention) for m in module.modules())
        yield from (("export", "meta", "fake") if mha else METHODS)
    elif method in METHODS:
        yield method
    else:
        raise InputError(f"unknown trace method {method!r}; use auto, export, meta or fake")


def run_trace(module: nn.Module, units: UnitMap, args: tuple, kwargs: dict, *, label: str,
              method: str = "auto", values: list[tuple[torch.Tensor, torch.Tensor]] = (),  # type: ignore[assignment]
              sequence: list[bool] | None = None) -> RawTrace:
    """Trace ``module`` once (see the module docstring); raise InputError naming the failure.

    Every method is tried with every block running its own code first (representative routing,
    :mod:`planner.intake.trace.routing`, lets most expert blocks run); only when all fail are the failing
    blocks made opaque, method by method. ``values`` are real values of integer inputs (a graph's
    edges) for the ops whose output shape depends on them (:func:`planner.intake.trace.load.index_values`);
    ``sequence`` says which tensor inputs follow ``seq_len`` (:func:`planner.intake.trace.load.sequence_flags`)."""
    failures: dict[str, _Failure] = {}
    first: dict[str, _Failure] = {}
    for attempt in _attempts(method, module):
        try:
            return _execute(module, units, args, kwargs, attempt, set(), values, sequence)
        except _TraceError as err:
            first[attempt] = err.failure
    for attempt in _attempts(method, module):
        opaque: set[str] = set()
        err_failure = first[attempt]
        while True:
            block = _enclosing_block(units, err_failure.path)
            if block is None or block in opaque:
                failures[attempt] = err_failure
                break
            opaque = opaque | _group_of(units, block)
            try:
                return _execute(module, units, args, kwargs, attempt, opaque, values, sequence)
            except _TraceError as err:
                err_failure = err.failure
    # the eager meta run fails closest to the user's code (export wraps errors, fake ones are terse)
    worst = failures.get("meta") or list(failures.values())[-1]
    where = f"module '{worst.path}'" if worst.path else "the model's own forward"
    op = f" at op {worst.op}" if worst.op else ""
    raise InputError(f"cannot trace {label}: {where} failed{op}: {worst.message}; {CONFIG_HINT}")


def _execute(module: nn.Module, units: UnitMap, args: tuple, kwargs: dict, attempt: str,
             opaque: set[str], values: list[tuple[torch.Tensor, torch.Tensor]] = (),  # type: ignore[assignment]
             sequence: list[bool] | None = None) -> RawTrace:
    run = _Run(module, units, args, kwargs, opaque, values)
    run.sequence = sequence if attempt == "meta" else None  # the other methods rebuild their inputs
    return getattr(run, attempt if attempt != "meta" else "eager")()
