"""torch's memory tracker as the cost model's oracle, at real sizes (``planner.runtime.memcheck.cases``).

Each case applies a real-size plan on torch's fake process group of the plan's world size, runs one
training step under FSDPMemTracker on fake tensors, and requires the cost model's allocated-memory
prediction per rank kind (the GPU-only terms, reported apart, removed) to be within 10 % of the
measurement and never below it by more than 3 %. ``bench/memory_oracle.py`` prints every case.

BUDGET: about 55 s on 2 cores at low load (issue 31's GPT-2 case adds about 15 s; before it, 40 s (measured with the change that added GPT-2 medium and two
planner-chosen cases: 3-6 s per fixed case, 6 and 15 s for the planned ones)); ZeRO 2 with selective
recomputation, TP x PP, GPipe, GPT-3 175B, the traced custom module and the interleaved reproductions
of issue 21 run in the bench (all within the band there).
"""

from __future__ import annotations

import pytest

from planner.runtime.memcheck.check import check_memory
from planner.runtime.memcheck.cases import CASES, CONTEXT_PARALLEL, PLANNED, case_model, case_plan

WITHIN, UNDER = 0.10, 0.03
IN_CI = ("llama70b-fsdp64-zero3", "mixtral-fsdp8-zero3", "llama8b-tp8-sp-zero0-1mb", "gpt2-medium-dp8-zero2")
"""Llama 3.1 70B under FSDP (ZeRO 3), Mixtral 8x7B (MoE, built by transformers) under ZeRO 3, and
Llama 3.1 8B under TP 8 with SP and a vocabulary-parallel loss (one micro-batch: the two-micro-batch
case is the bench's), and GPT-2 medium from its config.json (transformers' module: attention dropout,
the op-by-op tanh GELU, a tied head) over two micro-batches."""


@pytest.mark.parametrize("name", IN_CI)
def test_prediction_within_10_percent_never_3_percent_under(name: str) -> None:
    case = next(c for c in CASES if c.name == name)
    result = check_memory(case_plan(case), model=case_model(case))
    for rank in result.ranks:
        assert rank.measured_peak_gib > 1.0
        assert -UNDER <= rank.error <= WITHIN, (name, rank.pp_rank, rank.measured_peak_gib, rank.predicted_peak_gib)
        assert set(rank.gpu_only_gib) == {"runtime_overhead", "allocator_slack", "allocator_cache", "allocator_loss_block"}
        assert rank.predicted_gpu_peak_gib == pytest.approx(rank.predicted_peak_gib + sum(rank.gpu_only_gib.values()))


PLANNED_IN_CI = ("planned-llama8b-8gpu-zero2", "planned-llama8b-8gpu-tp4-pp2", "planned-gpt2-24l-a100-tp2-zero2")
"""Three of the planner-chosen cases (``cases.PLANNED``): the search's ZeRO 2 plan (TP + SP x FSDP2),
its TP 4 x PP 2 1F1B plan with several micro-batches in flight, and issue 31's GPT-2-family
config.json at tp 2 ZeRO 2 on 8 A100 (micro-batch 16 x 2,048: -38 % before its Conv1D blocks were
priced whole on every TP rank, ``costmodel.engines.EngineTerms.replicates_conv1d_blocks``); the interleaved reproductions of
issue 21 (8B and 70B), ZeRO 3 and a 4-stage pipeline run in ``bench/memory_oracle.py --planned``."""


CP_IN_CI = "cp-llama1b-8gpu-64k-cp4-tp2"
"""One planner-chosen context-parallel case (``cases.CONTEXT_PARALLEL``, issue 34): a 1.1B Llama with grouped
K/V at 65,536 tokens on 8 A100 under cp 4 x tp 2, whose all-gather attention gathers the K/V heads as
transformers passes them (``costmodel.cp_memory``); the others run in ``bench/memory_oracle.py --cp``."""


@pytest.mark.parametrize("name", (*PLANNED_IN_CI, CP_IN_CI))
def test_planned_figure_is_the_measured_peak_plus_gpu_only_terms(name: str) -> None:
    """The plan's own ``peak_memory_gib`` (the native engine's) is within +10 % / -3 % of the largest
    rank's measurement plus its GPU-only terms, and is the check's prediction of that rank."""
    case = next(c for c in (*PLANNED, *CONTEXT_PARALLEL) if c.name == name)
    plan = case_plan(case)
    assert name != CP_IN_CI or (plan.mesh.cp, plan.mesh.tp) == (4, 2)
    result = check_memory(plan, model=case_model(case))
    for rank in result.ranks:
        assert -UNDER <= rank.error <= WITHIN, (name, rank.pp_rank, rank.measured_peak_gib, rank.predicted_peak_gib)
    measured = max(r.measured_peak_gib + sum(r.gpu_only_gib.values()) for r in result.ranks)
    assert -UNDER <= plan.estimate.peak_memory_gib / measured - 1 <= WITHIN
    assert plan.estimate.peak_memory_gib == pytest.approx(max(r.predicted_gpu_peak_gib for r in result.ranks))
