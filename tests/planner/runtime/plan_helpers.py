"""Plans of a chosen shape for the runtime tests, built through the planner's own internals.

``meshplan plan --tp 2 ...`` (constraints) is another issue's work; until then a plan of a fixed
configuration is the search result of exactly that configuration, turned into the plan JSON by
``planner.plans.build.build_plan`` and checked by the plan validator, as ``meshplan plan`` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from costmodel.specs import ModelSpec, ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
from planner.intake.models.builder import decoder_lm
from planner.intake.models.presets import build_preset
from planner.plans.build import build_plan
from planner.plans.schema import Plan
from planner.estimation.config_checks import parallel_problems
from search.types import Candidate, SearchRequest, SearchResult, SearchStats

SEQ, BATCH = 16, 8
"""Every shape trains on the same global batch, so one reference run serves all of them."""

LLAMA_CONFIG = json.loads((Path(__file__).parent / "data" / "tiny-llama.json").read_text())
"""A small Llama (4 blocks, hidden 32, 4 heads, vocab 128, untied): the README's laptop example."""


def write_llama_config(folder: Path) -> str:
    """A small Llama ``config.json`` (4 blocks, hidden 32, 4 heads, vocab 128); its path."""
    path = folder / "config.json"
    path.write_text(json.dumps(LLAMA_CONFIG))
    return str(path)


def gpt_spec(layers: int = 4) -> ModelSpec:
    """The ``gpt-1.7b`` preset's shape (LayerNorm, GELU, biases, learned positions) scaled down to hidden
    32, 4 heads, FFN 128, vocab 128, untied (the runtime splits tied weights over neither tp nor pp),
    without dropout (equality needs deterministic steps)."""
    preset = build_preset("gpt-1.7b")
    block = preset.layers[1].model_copy(update=dict(hidden_size=32, num_heads=4, num_kv_heads=4, head_dim=8,
                                                    ffn_hidden_size=128, dropout=False))
    return decoder_lm("tiny-gpt", blocks=[block] * layers, vocab_size=128, tied_embeddings=False, max_seq_len=64,
                      source="gpt-1.7b preset shape, scaled down", learned_positions=64)


def llama_spec(layers: int = 4) -> ModelSpec:
    """The ``llama3.1-8b`` preset's shape (RMSNorm, SwiGLU, grouped-query attention, rotary positions)
    scaled down to hidden 32, 4 heads, 2 KV heads, FFN 64, vocab 128, untied: the runtime's own
    ``DecoderLM`` with ``nn.RMSNorm``, which the Hugging Face Llama does not use."""
    preset = build_preset("llama3.1-8b")
    block = preset.layers[1].model_copy(update=dict(hidden_size=32, num_heads=4, num_kv_heads=2, head_dim=8,
                                                    ffn_hidden_size=64))
    return decoder_lm("tiny-llama-preset", blocks=[block] * layers, vocab_size=128, tied_embeddings=False,
                      max_seq_len=64, source="llama3.1-8b preset shape, scaled down")


def make_plan(model_arg: Any, cfg: dict[str, Any], spec: ModelSpec | None = None, cluster: str = "dgx-a100") -> Plan:
    """The plan of exactly ``cfg`` (``ParallelConfig`` fields; global batch and seq default to BATCH, SEQ;
    the micro-batch to one micro-batch per step without pipelining and ``pp`` micro-batches with it)."""
    spec = spec or resolve_model_arg(model_arg)
    cluster_spec = resolve_cluster_arg(cluster)
    dp, pp = cfg.get("dp", 1), cfg.get("pp", 1)
    micro = BATCH // (dp * pp) if pp > 1 else BATCH // dp
    config = ParallelConfig(**{"global_batch": BATCH, "seq_len": SEQ, "micro_batch": micro, **cfg})
    problems = parallel_problems(spec, config, config.num_gpus)
    assert not problems, problems
    est = estimate_step(build_cost_table(spec, cluster_spec), config)
    result = SearchResult(best=Candidate(config, est), alternatives=(),
                          stats=SearchStats(evaluated=1, pruned=0, solver="fixed", status="optimal", gap=0.0, wall_time_s=0.0))
    req = SearchRequest(gpus=config.num_gpus, global_batch=config.global_batch, seq_len=config.seq_len)
    return build_plan(model_arg, spec, cluster_spec, req, result, False)
