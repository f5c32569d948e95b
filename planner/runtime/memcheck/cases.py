"""The memory oracle's cases: real-size models under every kind of split, as plans of a fixed shape.

Shared by ``bench/memory_oracle.py`` (which prints the per-case error table) and the oracle tests
(``tests/planner/runtime/test_check_memory*.py``). Each case is a model, a cluster and one
``ParallelConfig``; :func:`case_plan` turns it into the plan JSON model exactly as the planner
would write it for that configuration (``planner.plans.build.build_plan`` on a one-candidate result).

Models: presets Llama 3.1 8B and 70B, GPT-3 175B (tied embeddings, learned positions: the runtime
splits tied weights over neither TP nor PP, so it runs under FSDP) and the GPT-style
``megatron-gpt-16b`` (untied, rotary) under TP and PP, Mixtral 8x7B
from its Hugging Face ``config.json`` (built by transformers), and a custom module that is not a
transformers model (:func:`custom_lm`, traced by the planner).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from planner.plans.schema import Plan

MIXTRAL_8X7B_CONFIG = dict(
    architectures=["MixtralForCausalLM"], model_type="mixtral", hidden_size=4096, intermediate_size=14336,
    num_attention_heads=32, num_key_value_heads=8, num_hidden_layers=32, num_local_experts=8,
    num_experts_per_tok=2, vocab_size=32000, max_position_embeddings=32768, rms_norm_eps=1e-5,
    rope_theta=1e6, tie_word_embeddings=False, hidden_act="silu", sliding_window=None,
)
"""mistralai/Mixtral-8x7B-v0.1/config.json (the fields the model's shape depends on)."""


class _Mixer(nn.Module):
    """Causal multi-head attention with its own names (``read_q``, ``read_k``, ``read_v``, ``write``)."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.head_dim = width // heads
        self.read_q, self.read_k, self.read_v = (nn.Linear(width, width) for _ in range(3))
        self.write = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = (lin(x).view(b, s, -1, self.head_dim).transpose(1, 2) for lin in (self.read_q, self.read_k, self.read_v))
        return self.write(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1))


class _Cell(nn.Module):
    """Pre-norm cell: attention, then a squared-ReLU MLP (So et al. 2021, Primer)."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.pre_mix, self.mix = nn.LayerNorm(width), _Mixer(width, heads)
        self.pre_ff, self.expand, self.contract = nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.mix(self.pre_mix(x))
        return x + self.contract(torch.relu(self.expand(self.pre_ff(x))).square())


class CustomLM(nn.Module):
    """A language model that is not a transformers model: 8 cells of width 2048, vocabulary 32000."""

    def __init__(self, width: int = 2048, heads: int = 16, cells: int = 8, vocab: int = 32000) -> None:
        super().__init__()
        self.lookup = nn.Embedding(vocab, width)
        self.cells = nn.ModuleList(_Cell(width, heads) for _ in range(cells))
        self.final = nn.LayerNorm(width)
        self.readout = nn.Linear(width, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.lookup(tokens)
        for cell in self.cells:
            h = cell(h)
        return self.readout(self.final(h))


def custom_lm() -> nn.Module:
    """Factory of :class:`CustomLM` (``planner.runtime.memcheck.cases:custom_lm``)."""
    return CustomLM()


@dataclass(frozen=True)
class Case:
    """One oracle case: a model, a configuration (``ParallelConfig`` fields), a cluster."""

    name: str
    model: str
    config: dict[str, Any] = field(default_factory=dict)
    cluster: str = "dgx-h100"
    search: dict[str, Any] | None = None
    """``planner.plan`` keywords (gpus, batch, sequence, constraints): the case is the plan the
    native search picks for them, not ``config``."""


GPT2_MEDIUM_CONFIG = dict(
    architectures=["GPT2LMHeadModel"], model_type="gpt2", n_embd=1024, n_layer=24, n_head=16, n_inner=None,
    vocab_size=50257, n_positions=1024, activation_function="gelu_new", tie_word_embeddings=True,
)
"""openai-community/gpt2-medium/config.json (the fields the model's shape depends on; dropout 0.1 by
default): tied head, learned positions, Conv1D projections, the op-by-op tanh GELU."""
GPT2_24L_2K_CONFIG = dict(GPT2_MEDIUM_CONFIG, n_positions=2048, vocab_size=50304)
"""Issue 31's GPT-2-family config.json: GPT-2 medium's 24 blocks of 1,024 with ``gelu_new`` and a tied
head, 2,048 positions and the vocabulary padded to 50,304 (a multiple of 64, as nanoGPT pads it), so
that tp 2 divides it."""
LLAMA_1B_GQA_CONFIG = dict(
    architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=2048, intermediate_size=5632,
    num_attention_heads=32, num_key_value_heads=4, num_hidden_layers=22, vocab_size=32000,
    max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
)
"""A 1.1B Llama with grouped K/V (TinyLlama/TinyLlama_v1.1/config.json's shape: 22 blocks of 2,048, 32 query
heads over 4 K/V heads), its positions widened to 131,072 for long-context plans."""
LLAMA_3B_CONFIG = dict(
    architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=3072, intermediate_size=8192,
    num_attention_heads=24, num_key_value_heads=8, num_hidden_layers=28, vocab_size=128256,
    max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
)
"""meta-llama/Llama-3.2-3B/config.json (the fields the model's shape depends on; the rope scaling dropped)."""
CONFIGS = {"mixtral-8x7b.json": MIXTRAL_8X7B_CONFIG, "gpt2-medium.json": GPT2_MEDIUM_CONFIG, "gpt2-24l-2k.json": GPT2_24L_2K_CONFIG,
           "llama-1b-gqa.json": LLAMA_1B_GQA_CONFIG, "llama3.2-3b.json": LLAMA_3B_CONFIG}


def config_path(name: str) -> str:
    """``CONFIGS[name]`` as a config.json, written once per process into a temporary folder."""
    path = Path(tempfile.gettempdir()) / "meshplan-memcheck" / name.removesuffix(".json") / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(CONFIGS[name], indent=1)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return str(path)


def mixtral_config_path() -> str:
    """Mixtral 8x7B's config.json (:func:`config_path`)."""
    return config_path("mixtral-8x7b.json")


def _model_arg(model: str) -> str:
    return config_path(model) if model in CONFIGS else model


def case_model(case: Case) -> str:
    """The model argument of ``case`` (what ``check_memory``'s ``model`` takes: a plan's own
    factory or config.json path is never built unless passed again)."""
    return _model_arg(case.model)


def case_plan(case: Case) -> Plan:
    """The plan of exactly ``case.config`` for ``case.model`` on ``case.cluster``."""
    from costmodel.specs import ParallelConfig
    from costmodel.step import estimate_step
    from costmodel.table import build_cost_table
    from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
    from planner.plans.build import build_plan
    from search.types import Candidate, SearchRequest, SearchResult, SearchStats

    arg = _model_arg(case.model)
    if case.search is not None:
        from planner.plans.build import plan

        return plan(model=arg, cluster=case.cluster, target="native", **case.search)
    spec, cluster = resolve_model_arg(arg), resolve_cluster_arg(case.cluster)
    cfg = ParallelConfig(**case.config)
    est = estimate_step(build_cost_table(spec, cluster), cfg)
    stats = SearchStats(evaluated=1, pruned=0, solver="fixed", status="optimal", gap=0.0, wall_time_s=0.0)
    result = SearchResult(best=Candidate(cfg, est), alternatives=(), stats=stats)
    req = SearchRequest(gpus=cfg.num_gpus, global_batch=cfg.global_batch, seq_len=cfg.seq_len)
    return build_plan(arg, spec, cluster, req, result, False)


CASES: tuple[Case, ...] = (
    Case("llama8b-fsdp8-zero3", "llama3.1-8b", dict(dp=8, zero=3, global_batch=8, seq_len=8192)),
    Case("llama8b-tp8-sp-zero0", "llama3.1-8b", dict(tp=8, sp=True, zero=0, global_batch=4, seq_len=8192)),
    Case("llama8b-tp8-sp-zero0-1mb", "llama3.1-8b", dict(tp=8, sp=True, zero=0, global_batch=1, seq_len=8192)),
    Case("llama8b-tp4-dp2-zero1-full", "llama3.1-8b", dict(tp=4, dp=2, sp=True, zero=1, recompute="full", global_batch=8, seq_len=8192)),
    Case("llama8b-fsdp8-zero2-selective", "llama3.1-8b", dict(dp=8, zero=2, recompute="selective", global_batch=8, seq_len=8192)),
    Case("llama70b-fsdp64-zero3", "llama3.1-70b", dict(dp=64, zero=3, global_batch=64, seq_len=4096)),
    Case("llama70b-tp8-pp4-dp2-1f1b-full", "llama3.1-70b", dict(tp=8, pp=4, dp=2, sp=True, zero=1, recompute="full", global_batch=16, seq_len=8192)),
    Case("gpt3-175b-fsdp64-zero3", "gpt3-175b", dict(dp=64, zero=3, global_batch=64, seq_len=2048)),
    Case("gpt16b-tp4-dp4-zero2", "megatron-gpt-16b", dict(tp=4, dp=4, sp=True, zero=2, global_batch=16, seq_len=4096)),
    Case("gpt16b-pp4-dp2-gpipe-full", "megatron-gpt-16b", dict(pp=4, dp=2, zero=1, schedule="gpipe", recompute="full", global_batch=8, seq_len=4096)),
    Case("gpt16b-pp4-dp2-1f1b", "megatron-gpt-16b", dict(pp=4, dp=2, zero=1, global_batch=16, seq_len=4096)),
    Case("mixtral-fsdp8-zero3", "mixtral-8x7b.json", dict(dp=8, zero=3, global_batch=8, seq_len=4096)),
    Case("gpt2-medium-dp8-zero2", "gpt2-medium.json", dict(dp=8, zero=2, global_batch=16, seq_len=1024)),
    Case("custom-tp2-dp4-zero2", "planner.runtime.memcheck.cases:custom_lm", dict(tp=2, dp=4, sp=True, zero=2, global_batch=8, seq_len=4096)),
)
"""Every split the oracle covers: FSDP (ZeRO 3), TP with SP, TP x DP (ZeRO 1, 2), the recompute
modes, 1F1B and GPipe pipelines, a dense GPT-3-style model, an MoE model and a traced custom module.

What the oracle found, and what was fixed where (``bench/memory_oracle.py`` prints the table):
- in the measurement: DTensor's sharding propagation runs every op on fake tensors of the *global*
  shape, which the tracker counted (``memcheck_step._untracked_propagation``); the loss was not
  vocabulary-parallel under PP; the step stopped before the phases that set the real peak (a second
  micro-batch without PP, the steady state with PP);
- in the cost model (the native engine = torchtitan's memory terms, ``costmodel.engines``): the peak is the larger of two
  phases, since gradients are freed each step (their blocks stay in the allocator's cache, a GPU-only
  term); ZeRO 1 runs as FSDP2 ZeRO 2; gradients accumulate unsharded under PP; DTensor SP keeps the
  gathered projection inputs; DTensor's vocabulary-parallel embedding computes a full-vocabulary
  gradient; ``loss_parallel``'s backward holds 16 B per local logit; a GPipe last stage keeps every
  micro-batch's fp32 log-softmax until its backward (``costmodel.memory.held_loss_bytes``)."""


PLANNED: tuple[Case, ...] = (
    Case("planned-llama8b-16gpu-tp2-pp2", "llama3.1-8b", search=dict(gpus=16, global_batch=64, seq_len=4096, tp=2, pp=2)),
    Case("planned-llama70b-64gpu-tp8-pp2", "llama3.1-70b", search=dict(gpus=64, global_batch=128, seq_len=4096, tp=8, pp=2)),
    Case("planned-llama8b-8gpu-zero3", "llama3.1-8b", search=dict(gpus=8, global_batch=16, seq_len=8192, zero=3)),
    Case("planned-llama8b-8gpu-zero2", "llama3.1-8b", search=dict(gpus=8, global_batch=16, seq_len=8192, zero=2)),
    Case("planned-llama8b-8gpu-pp4", "llama3.1-8b", search=dict(gpus=8, global_batch=32, seq_len=4096, pp=4, vpp=1)),
    Case("planned-llama8b-8gpu-tp4-pp2", "llama3.1-8b", search=dict(gpus=8, global_batch=32, seq_len=4096, tp=4, pp=2, vpp=1)),
    Case("planned-gpt2-medium-8gpu", "gpt2-medium.json", search=dict(gpus=8, global_batch=64, seq_len=1024)),
    Case("planned-gpt2-24l-a100-tp2-zero2", "gpt2-24l-2k.json", "dgx-a100", search=dict(gpus=8, global_batch=64, seq_len=2048, tp=2, zero=2)),
    Case("planned-llama8b-16gpu-tp2-zero3-8k", "llama3.1-8b", search=dict(gpus=16, global_batch=32, seq_len=8192, tp=2, pp=1, zero=3)),
    Case("planned-llama8b-8gpu-zero1", "llama3.1-8b", search=dict(gpus=8, global_batch=16, seq_len=4096, zero=1)),
    Case("planned-llama8b-8gpu-zero0", "llama3.1-8b", search=dict(gpus=8, global_batch=16, seq_len=4096, zero=0)),
    Case("planned-llama8b-8gpu-full", "llama3.1-8b", search=dict(gpus=8, global_batch=16, seq_len=8192, recompute="full")),
    Case("planned-llama8b-8gpu-selective", "llama3.1-8b", search=dict(gpus=8, global_batch=16, seq_len=8192, recompute="selective")),
    Case("planned-mixtral-16gpu", "mixtral-8x7b.json", search=dict(gpus=16, global_batch=32, seq_len=4096)),
)
"""Planner-chosen cases: the plans ``meshplan plan --target native`` picks, searched when the case is
built (``Case.search``), for issue 21's two reproductions (``--model llama3.1-8b --cluster dgx-h100
--gpus 16 --global-batch 64 --seq-len 4096 --tp 2 --pp 2``: interleaved 1F1B, ZeRO 1, TP + SP;
``llama3.1-70b``, 64 GPUs, batch 128, ``--tp 8 --pp 2``) and for the splits the acceptance names:
ZeRO 3 and ZeRO 2 (the search's TP x FSDP plans on 8 GPUs), a 4-stage pipeline with several
micro-batches in flight, TP + SP under a 2-stage 1F1B pipeline, and GPT-2 medium from its
config.json (transformers' module: tied head, learned positions, op-by-op tanh GELU, dropout), issue 31's
cases (the GPT-2-family config at tp 2 ZeRO 2 on 8 A100, micro-batch 16 x 2,048; Llama 3.1 8B on 16
H100 at tp 2 ZeRO 3, sequence 8,192) and one plan per ZeRO stage, recompute mode and an MoE. ``bench/memory_oracle.py --planned``
measures them; the plan's own per-GPU figure is the native engine's, which the check predicts with."""


CONTEXT_PARALLEL: tuple[Case, ...] = (
    Case("cp-llama1b-8gpu-32k-cp2", "llama-1b-gqa.json", "dgx-a100", search=dict(gpus=8, global_batch=8, seq_len=32768, cp=2)),
    Case("cp-llama1b-8gpu-64k-cp4-tp2", "llama-1b-gqa.json", "dgx-a100", search=dict(gpus=8, global_batch=8, seq_len=65536, cp=4, tp=2)),
    Case("cp-llama1b-8gpu-32k-cp2-pp2-full", "llama-1b-gqa.json", "dgx-a100", search=dict(gpus=8, global_batch=16, seq_len=32768, cp=2, pp=2, recompute="full")),
    Case("cp-llama1b-8gpu-64k-cp2-zero3-selective", "llama-1b-gqa.json", "dgx-a100", search=dict(gpus=8, global_batch=8, seq_len=65536, cp=2, zero=3, recompute="selective")),
    Case("cp-llama3b-16gpu-32k-cp2", "llama3.2-3b.json", "dgx-a100", search=dict(gpus=16, global_batch=16, seq_len=32768, cp=2)),
    Case("cp-llama3b-16gpu-64k-cp4", "llama3.2-3b.json", "dgx-a100", search=dict(gpus=16, global_batch=16, seq_len=65536, cp=4)),
    Case("cp-llama8b-16gpu-32k-cp2", "llama3.1-8b", search=dict(gpus=16, global_batch=16, seq_len=32768, cp=2)),
    Case("cp-llama8b-16gpu-128k", "llama3.1-8b", search=dict(gpus=16, global_batch=16, seq_len=131072, cp=(2, 16))),
)
"""Planner-chosen context-parallel plans (issue 34: check-memory on cp plans within the memory band): the
native search's pick under a ``cp`` constraint for a 1.1B Llama with grouped K/V on 8 A100 at 32K-64K
tokens (with tp, pp, ZeRO 3 and each recompute mode), a Llama 3.2 3B on 16 A100 and Llama 3.1 8B on 16
H100 at 32K and at issue 34's 131,072 tokens with ``--cp 2..16``. ``bench/memory_oracle.py --cp``
measures them."""
