"""Trace any PyTorch model into a :class:`~costmodel.specs.ModelSpec` and a layer graph, without a GPU.

Entry points: :func:`model_from_factory` (``--model file.py:factory`` / ``package.module:factory``),
:func:`model_from_module` (``planner.plan(model=nn.Module)``), :func:`model_from_hf_config`
(``--model config.json --trace``), :func:`trace_module` (the full :class:`ModelTrace`) and
:func:`layer_graph` (a networkx view of a spec or a trace).

Modules are built and run on the ``meta`` device (:mod:`planner.intake.trace.run`): a 405B-parameter model
traces in little memory, and one block of each repeated group is traced for all of them
(:mod:`planner.intake.trace.stubs`). Ops are grouped into layers by module (:mod:`planner.intake.trace.units`),
transformer blocks, embeddings, norms and heads are recognised (:mod:`planner.intake.trace.recognize`) and
everything else becomes a generic layer with measured per-token totals (:mod:`planner.intake.trace.build`).

FLOP convention: that of ``costmodel.flops`` (2mkn per matmul; causal self-attention counts half of
the s x s work). Traced SDPA calls with ``is_causal=True`` are halved; attention written out with
matmul and softmax, or given an explicit mask, is counted in full (its mask is not visible on meta).
"""

from __future__ import annotations

import time
from typing import Any

from torch import nn

from costmodel.specs import ModelSpec
from planner.errors import InputError
from planner.intake.trace.build import Shape, build_layers
from planner.intake.trace.graph import layer_graph
from planner.intake.trace.load import (MakeInputs, example_inputs, hf_model, index_values, load_factory,
                                      sequence_flags, unpack_factory_result)
from planner.intake.trace.run import run_trace
from planner.intake.trace.shadow import MAX_ELEMENTS
from planner.intake.trace.types import LayerTrace, ModelTrace
from planner.intake.trace.units import find_units

__all__ = [
    "model_from_factory",
    "model_from_module",
    "model_from_hf_config",
    "trace_module",
    "layer_graph",
    "ModelTrace",
    "LayerTrace",
]


def trace_module(module: nn.Module, make_inputs: MakeInputs | None = None, *, name: str = "traced",
                 micro_batch: int = 1, seq_len: int = 128, source: str = "",
                 method: str = "auto") -> ModelTrace:
    """Trace ``module`` (any device; traced on meta) into a :class:`ModelTrace`.

    ``make_inputs(micro_batch, seq_len)`` builds example inputs (default: token ids). ``method`` is
    ``auto`` (torch.export, then eager meta, then FakeTensorMode), or one of them. Raises
    :class:`planner.errors.InputError` when the model cannot be traced.
    """
    if micro_batch <= 0 or seq_len <= 0:
        raise InputError(f"micro_batch {micro_batch} and seq_len {seq_len} must be positive")
    start = time.perf_counter()
    module, make_inputs = unpack_factory_result((module, make_inputs) if make_inputs else module, name)
    args, kwargs, sequence = example_inputs(make_inputs, micro_batch, seq_len)
    was_training = module.training
    module.train()
    try:
        units = find_units(module)
        values = index_values(make_inputs, micro_batch, seq_len, args, kwargs, MAX_ELEMENTS)
        flags = sequence_flags(make_inputs, micro_batch, seq_len)
        raw = run_trace(module, units, args, kwargs, label=name, method=method, values=values, sequence=flags)
    finally:
        module.train(was_training)
    shape = _shape(raw, micro_batch, seq_len, sequence)
    built = build_layers(units, raw, shape)
    spec = ModelSpec(
        name=name, layers=tuple(built.layers), tied_embeddings=built.tied,
        max_seq_len=built.max_positions or _max_positions(module),
        tokens_per_sample=shape.tokens_per_sample,
        extra_edges=tuple(e for e in built.edges if e.dst > e.src + 1),
        source=source or f"traced:{name}", notes=tuple(built.notes),
    )
    return ModelTrace(spec=spec, layers=tuple(built.traces), edges=tuple(built.edges), method=raw.method,
                      micro_batch=micro_batch, seq_len=seq_len, tokens=shape.tokens, context=shape.context,
                      seconds=time.perf_counter() - start)


def _shape(raw: Any, micro_batch: int, seq_len: int, sequence: bool) -> Shape:
    """Tokens and context of the traced micro-batch: the sequence, else the attention length, else 1.

    With a sequence, layers whose own ops read no input that follows ``seq_len`` (a speech encoder)
    keep the query length of their attention as their own (``Shape.fixed``).

    Attention over windows of a sample (Swin: the SDPA batch is the micro-batch times the windows)
    has no sequence to split: one sample counts as one token, as a CNN's does."""
    if sequence:
        fixed = [op.dims[2] for inst in raw.instances if not inst.reads_sequence
                 for op in inst.ops if op.kind == "attention" and not op.glue]
        return Shape(tokens=micro_batch * seq_len, context=seq_len, tokens_per_sample=0, fixed=max(fixed, default=0))
    calls = [op for inst in raw.instances for op in inst.ops if op.kind == "attention"]
    windowed = any(op.out_shapes and len(op.out_shapes[0]) == 4 and op.out_shapes[0][0] != micro_batch for op in calls)
    per_sample = 1 if windowed else max((op.dims[3] for op in calls), default=1)
    return Shape(tokens=micro_batch * per_sample, context=per_sample, tokens_per_sample=per_sample)


def _max_positions(module: nn.Module) -> int:
    config = getattr(module, "config", None)
    for key in ("max_position_embeddings", "n_positions", "max_seq_len"):
        value = getattr(config, key, None) if config is not None else getattr(module, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return 0


def model_from_module(module: nn.Module, make_inputs: MakeInputs | None = None, *, name: str = "traced",
                      micro_batch: int = 1, seq_len: int = 128) -> ModelSpec:
    """The ModelSpec of a live ``nn.Module`` (``planner.plan(model=module)``); see :func:`trace_module`."""
    return trace_module(module, make_inputs, name=name, micro_batch=micro_batch, seq_len=seq_len).spec


def model_from_factory(arg: str, *, micro_batch: int = 1, seq_len: int = 128) -> ModelSpec:
    """The ModelSpec of ``path/to/file.py:factory`` or ``package.module:factory`` (DESIGN.md contract)."""
    module, make_inputs = load_factory(arg)
    label = arg.rpartition(":")[2]
    return trace_module(module, make_inputs, name=label, micro_batch=micro_batch, seq_len=seq_len,
                        source=f"traced:{arg}").spec


def model_from_hf_config(path: str, *, micro_batch: int = 1, seq_len: int = 128) -> ModelSpec:
    """The ModelSpec of the transformers model a ``config.json`` describes (``--trace``), traced on meta."""
    module, make_inputs, name = hf_model(path)
    return trace_module(module, make_inputs, name=name, micro_batch=micro_batch, seq_len=seq_len,
                        source=f"traced:{path}").spec
