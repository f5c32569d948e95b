"""Plans for the report tests, built from fixed configurations (no search) so they are quick and
stable: a Llama 3.1 70B plan on 64 H100s with two runners-up, and a small interleaved one."""

from __future__ import annotations

from typing import Any

import pytest

from costmodel.specs import ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
from planner.plans.build import build_plan
from planner.plans.schema import Plan
from search.types import Candidate, SearchRequest, SearchResult, SearchStats

LLAMA70B = dict(tp=2, pp=4, cp=2, dp=4, sp=True, zero=3, engine="torchtitan", global_batch=512, seq_len=4096, micro_batch=1, recompute="full")
RUNNERS_UP = (dict(LLAMA70B, cp=4, dp=2, micro_batch=2), dict(LLAMA70B, tp=8, pp=2, cp=1, dp=4))


def make_plan(model: str, cluster: str, alternatives: tuple[dict[str, Any], ...] = (), target: str = "megatron", **config: Any) -> Plan:
    """The plan meshplan writes when the search picks ``config`` and keeps ``alternatives``."""
    spec, hw = resolve_model_arg(model), resolve_cluster_arg(cluster)
    table = build_cost_table(spec, hw)
    cfg = ParallelConfig(**config)
    alts = tuple(Candidate(ParallelConfig(**a), estimate_step(table, ParallelConfig(**a))) for a in alternatives)
    req = SearchRequest(gpus=cfg.num_gpus, global_batch=cfg.global_batch, seq_len=cfg.seq_len, target=target, top_k=len(alts))  # type: ignore[arg-type]
    stats = SearchStats(evaluated=40, pruned=60, solver="fixture", status="feasible", gap=0.05, wall_time_s=1.5)
    return build_plan(model, spec, hw, req, SearchResult(Candidate(cfg, estimate_step(table, cfg)), alts, stats), False)


@pytest.fixture(scope="session")
def llama_plan() -> Plan:
    """Llama 3.1 70B, 64 x H100: tp 2 x pp 4 x cp 2 x dp 4, FSDP (zero 3) for torchtitan, and two runners-up."""
    return make_plan("llama3.1-70b", "dgx-h100", RUNNERS_UP, target="torchtitan", **LLAMA70B)


@pytest.fixture(scope="session")
def small_plan() -> Plan:
    """Llama 3.1 8B, 16 x H100, interleaved 1F1B with full recomputation, no alternatives."""
    return make_plan("llama3.1-8b", "dgx-h100", (), target="native", tp=2, pp=2, dp=4, vpp=2, schedule="interleaved-1f1b",
                     sp=True, zero=3, recompute="full", global_batch=64, seq_len=4096, micro_batch=2)


@pytest.fixture
def plan_factory():
    """Build other plans."""
    return make_plan
