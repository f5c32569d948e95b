"""Building the spec from recorded instances: merges, surplus parameters, TP modes, edges, names."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from costmodel.specs import EmbeddingLayer, GenericLayer, TransformerLayer
from planner.intake.trace import trace_module
from planner.intake.trace.build import _pattern


def test_repeat_groups_share_one_name() -> None:
    assert _pattern("model.layers.17") == "model.layers.*"
    assert _pattern("encoder.block.0.layer") == "encoder.block.*.layer"


class Tables(nn.Module):
    def __init__(self, rows: tuple[int, ...]) -> None:
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(r, 8) for r in rows)
        self.out = nn.Linear(8 * len(rows), 1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(torch.cat([t(ids[:, i : i + 1]) for i, t in enumerate(self.tables)], dim=1))


def _inputs(columns: int):
    return lambda b, s: torch.zeros(b, columns, dtype=torch.long)


def test_similar_tables_are_placed_whole_and_a_dominant_one_split_by_rows() -> None:
    even = trace_module(Tables((1000, 1200, 900)), _inputs(3)).spec.layers[0]
    skewed = trace_module(Tables((100_000, 10, 10)), _inputs(3)).spec.layers[0]
    assert (even.tp_mode, skewed.tp_mode) == ("table", "vocab") and even.sparse_lookup
    assert even.fwd_flops_per_token == 0 and even.params == 3100 * 8


def test_surplus_parameters_follow_the_block_and_pass_its_output(zoo) -> None:
    with torch.device("meta"):
        model = zoo.GPT2(vocab=100, positions=32, hidden=32, heads=2, layers=2)
        for block in model.blocks:
            block.register_parameter("gain", nn.Parameter(torch.ones(32)))
    trace = trace_module(model, seq_len=32)
    kinds = [x.kind for x in trace.spec.layers]
    assert kinds == ["embedding", "transformer", "generic", "transformer", "generic", "norm", "head"]
    extra = trace.spec.layers[2]
    assert extra.params == 32 and extra.output_bytes_per_token == 32 * 2 and extra.name == "blocks.*.extra_params"
    assert [(e.src, e.dst) for e in trace.edges] == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6)]
    assert not trace.spec.extra_edges and trace.spec.layers[1] is trace.spec.layers[3]


class Skip(nn.Module):
    """Two towers: the first layer's output skips the second layer (a non-chain graph)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(16, 16), nn.Conv1d(4, 4, 1), nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.a(x))
        z = self.b(y.view(-1, 4, 4)).view(-1, 16)
        return self.c(y) + z  # the add is glue of c: it reads z from b


def test_skip_connections_become_extra_edges_and_layers_stay_topological() -> None:
    trace = trace_module(Skip(), lambda b, s: torch.randn(b, 16))
    spec = trace.spec
    assert [x.name for x in spec.layers] == ["a", "b", "c"]
    assert [(e.src, e.dst, e.bytes_per_token) for e in spec.extra_edges] == [(0, 2, 32.0)]
    assert [(e.src, e.dst) for e in trace.edges] == [(0, 1), (0, 2), (1, 2)]
    assert spec.layers[1].tp_mode == "none" and spec.layers[0].tp_mode == "column"
    assert spec.layers[0].output_bytes_per_token == 32.0  # read by both b and c, counted once


def test_token_and_position_tables_merge_into_one_embedding(zoo) -> None:
    with torch.device("meta"):
        model = zoo.GPT2(vocab=100, positions=64, hidden=32, heads=2, layers=1)
    layer = trace_module(model, seq_len=16).spec.layers[0]
    assert isinstance(layer, EmbeddingLayer) and (layer.vocab_size, layer.max_positions) == (100, 64)


def test_a_block_that_is_not_a_transformer_stays_generic_with_its_measurements(zoo) -> None:
    with torch.device("meta"):
        model = zoo.GPT2(vocab=100, positions=32, hidden=32, heads=2, layers=2)
        for block in model.blocks:
            block.mlp.append(nn.Linear(32, 32))
    trace = trace_module(model, seq_len=32)
    blocks = trace.spec.layers[1:3]
    assert all(isinstance(x, GenericLayer) and x.tp_mode == "column_row" for x in blocks)
    assert blocks[0].fwd_attn_flops_per_token_per_ctx == 4 * 32 / 2  # causal SDPA, per token per context
    assert not any(isinstance(x, TransformerLayer) for x in trace.spec.layers)
