"""A model's layer graph as a networkx DiGraph: one node per layer, one edge per data flow.

Nodes are the indices of ``ModelSpec.layers`` with attributes ``kind``, ``name``, ``params``,
``flops`` (forward FLOPs per token that scale with tokens), ``attn_flops_per_ctx`` (forward FLOPs per
token per context token) and, for a trace, ``module`` (the module paths behind the layer). Edges carry
``bytes_per_token``: the activation bytes, at training precision, that a pipeline cut between the two
layers must send. A cut after layer ``i`` sends the sum over the edges ``a -> b`` with
``a <= i < b``.

From a :class:`~planner.intake.trace.types.ModelTrace` every figure is measured (edges included, the
neighbour edges too). From a plain :class:`~costmodel.specs.ModelSpec` (a preset, a config) the
figures come from ``costmodel.flops``, neighbour edges carry each layer's output (the hidden state
for embeddings, blocks and norms; ``output_bytes_per_token`` for generic layers) and the spec's
``extra_edges`` are added as they are.
"""

from __future__ import annotations

import networkx as nx

from costmodel.flops import layer_fwd_flops
from costmodel.params import layer_params
from costmodel.local import ACT_BYTES
from costmodel.specs import GenericLayer, HeadLayer, Layer, ModelSpec
from planner.intake.trace.types import ModelTrace


def _spec_output_bytes(layer: Layer) -> float:
    if isinstance(layer, GenericLayer):
        return layer.output_bytes_per_token
    if isinstance(layer, HeadLayer):
        return 0.0
    return float(layer.hidden_size * ACT_BYTES)


def _spec_graph(spec: ModelSpec) -> nx.DiGraph:
    graph = nx.DiGraph(name=spec.name, source=spec.source)
    for i, layer in enumerate(spec.layers):
        linear = layer_fwd_flops(layer, 1.0, 0)
        graph.add_node(i, kind=layer.kind, name=layer.name, params=layer_params(layer), flops=linear,
                       attn_flops_per_ctx=layer_fwd_flops(layer, 1.0, 1) - linear)
    for i in range(len(spec.layers) - 1):
        graph.add_edge(i, i + 1, bytes_per_token=_spec_output_bytes(spec.layers[i]))
    for edge in spec.extra_edges:
        graph.add_edge(edge.src, edge.dst, bytes_per_token=edge.bytes_per_token)
    return graph


def _trace_graph(trace: ModelTrace) -> nx.DiGraph:
    spec = trace.spec
    graph = nx.DiGraph(name=spec.name, source=spec.source, method=trace.method)
    tokens = float(trace.tokens)
    for i, (layer, measured) in enumerate(zip(spec.layers, trace.layers)):
        graph.add_node(i, kind=layer.kind, name=layer.name, params=measured.params,
                       flops=measured.fwd_flops / tokens,
                       attn_flops_per_ctx=measured.fwd_attn_flops / (tokens * trace.context),
                       module=measured.modules)
    for edge in trace.edges:
        graph.add_edge(edge.src, edge.dst, bytes_per_token=edge.bytes_per_token)
    return graph


def layer_graph(spec_or_trace: ModelSpec | ModelTrace) -> nx.DiGraph:
    """The layer graph of a spec or a trace (see the module docstring)."""
    if isinstance(spec_or_trace, ModelTrace):
        return _trace_graph(spec_or_trace)
    if isinstance(spec_or_trace, ModelSpec):
        return _spec_graph(spec_or_trace)
    raise TypeError(f"layer_graph takes a ModelSpec or a ModelTrace, not {type(spec_or_trace).__name__}")
