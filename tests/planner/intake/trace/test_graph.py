"""The layer graph of a spec (formulas) and of a trace (measurements)."""

from __future__ import annotations

import networkx as nx
import pytest

from costmodel.params import layer_params
from planner.intake.models import resolve_model
from planner.intake.trace import layer_graph, trace_module
from planner.intake.trace.load import load_factory


def test_preset_graph_is_a_chain_with_hidden_state_edges() -> None:
    spec = resolve_model("llama3.1-8b")
    graph = layer_graph(spec)
    assert list(graph.nodes) == list(range(35)) and nx.is_directed_acyclic_graph(graph)
    assert graph.number_of_edges() == 34
    assert graph.edges[0, 1]["bytes_per_token"] == 4096 * 2
    block = graph.nodes[1]
    assert block["kind"] == "transformer" and block["params"] == layer_params(spec.layers[1])
    h, q, kv, f = 4096, 4096, 1024, 14336
    assert block["flops"] == 2 * (h * (q + 2 * kv) + q * h + 3 * h * f)
    assert block["attn_flops_per_ctx"] == pytest.approx(4 * q * 0.5)  # causal: half the s x s work


def test_trace_graph_has_measured_nodes_and_cross_attention_edges(factory) -> None:
    module, make_inputs = load_factory(factory("t5"))
    trace = trace_module(module, make_inputs, name="t5", micro_batch=2, seq_len=64)
    graph = layer_graph(trace)
    assert nx.is_directed_acyclic_graph(graph) and graph.number_of_nodes() == len(trace.spec.layers)
    assert (3, 5) in graph.edges and (3, 6) in graph.edges and (3, 4) not in graph.edges  # decoder ids come from input
    assert graph.nodes[1]["module"] == ("encoder.0",)
    assert sum(graph.nodes[n]["params"] for n in graph) == sum(p.numel() for p in module.parameters())
    spec_graph = layer_graph(trace.spec)
    assert spec_graph.nodes[1]["flops"] == pytest.approx(graph.nodes[1]["flops"])
    assert spec_graph.nodes[1]["attn_flops_per_ctx"] == pytest.approx(graph.nodes[1]["attn_flops_per_ctx"])
    assert {(e.src, e.dst) for e in trace.spec.extra_edges} <= set(spec_graph.edges)


def test_layer_graph_rejects_other_inputs() -> None:
    with pytest.raises(TypeError):
        layer_graph("llama3.1-8b")
