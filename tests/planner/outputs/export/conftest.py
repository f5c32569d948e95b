"""Plans built from fixed configurations (no search), so exports and their golden files depend only
on the configuration, the presets and the exporters."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from costmodel.specs import ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
from planner.plans.build import build_plan
from planner.plans.schema import Plan
from search.targets import engine_fields
from search.types import Candidate, SearchRequest, SearchResult, SearchStats

GOLDEN = Path(__file__).parent / "golden"
UPDATE = "MESHPLAN_UPDATE_GOLDEN"
"""Set to 1 to rewrite the golden files from the current output (then review the diff)."""


def make_plan(model: str = "llama3.1-8b", cluster: str = "dgx-h100", target: str = "native",
              alternatives: tuple[dict[str, Any], ...] = (), **config: Any) -> Plan:
    """The plan meshplan writes when the search picks ``config`` (and keeps ``alternatives``), on the
    target's engine with its overlap settings (``search.targets.engine_fields``) unless ``config`` says."""
    spec, hw = resolve_model_arg(model), resolve_cluster_arg(cluster)
    table = build_cost_table(spec, hw)
    cfg = ParallelConfig(**{**engine_fields(target, config.get("zero", 0)), **config})
    alts = tuple(Candidate(ParallelConfig(**a), estimate_step(table, ParallelConfig(**a))) for a in alternatives)
    req = SearchRequest(gpus=cfg.num_gpus, global_batch=cfg.global_batch, seq_len=cfg.seq_len, target=target, top_k=len(alts))  # type: ignore[arg-type]
    stats = SearchStats(evaluated=1 + len(alts), pruned=0, solver="fixture", status="optimal", gap=0.0, wall_time_s=0.0)
    return build_plan(model, spec, hw, req, SearchResult(Candidate(cfg, estimate_step(table, cfg)), alts, stats), False)


def check_golden(name: str, text: str) -> None:
    """``text`` equals ``golden/name`` byte for byte (``MESHPLAN_UPDATE_GOLDEN=1`` rewrites it)."""
    path = GOLDEN / name
    if os.environ.get(UPDATE) == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"golden file {path} is missing; create it with {UPDATE}=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden file; if intended, rerun with {UPDATE}=1"


@pytest.fixture
def plan_of() -> Callable[..., Plan]:
    """Build a plan from a fixed configuration."""
    return make_plan


@pytest.fixture
def golden() -> Callable[[str, str], None]:
    """Compare text with a golden file."""
    return check_golden


@pytest.fixture
def tmp_plan(tmp_path: Path) -> Callable[[Plan], str]:
    """Write a plan file and return its path."""
    def write(plan: Plan) -> str:
        path = tmp_path / "plan.json"
        path.write_text(plan.to_json())
        return str(path)

    return write


ENGINE_CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama8b-megatron-interleaved": ("llama3.1-8b", "megatron", dict(tp=2, pp=2, dp=4, sp=True, zero=1, vpp=2, schedule="interleaved-1f1b", global_batch=64, seq_len=4096, recompute="selective")),
    "llama8b-megatron-uneven-cp": ("llama3.1-8b", "megatron", dict(tp=2, pp=2, cp=2, dp=2, sp=True, zero=1, stage_layers=(15, 20), global_batch=64, seq_len=8192, recompute="full")),
    "llama8b-torchtitan-interleaved": ("llama3.1-8b", "torchtitan", dict(tp=2, pp=2, dp=4, sp=True, zero=3, vpp=2, schedule="interleaved-1f1b", global_batch=64, seq_len=4096, micro_batch=2, recompute="full")),
    "llama8b-torchtitan-cp": ("llama3.1-8b", "torchtitan", dict(tp=2, cp=2, dp=4, sp=True, zero=3, global_batch=64, seq_len=8192, recompute="full")),
    "llama8b-torchtitan-compiled-async-tp": ("llama3.1-8b", "torchtitan", dict(tp=2, dp=8, sp=True, zero=3, global_batch=64, seq_len=4096, micro_batch=2,
                                                                                recompute="selective", compile=True, tp_comm_overlap=True)),
    "llama8b-deepspeed-pipeline": ("llama3.1-8b", "deepspeed", dict(tp=1, pp=2, dp=8, zero=1, global_batch=64, seq_len=4096, recompute="full")),
    "llama8b-deepspeed-zero3": ("llama3.1-8b", "deepspeed", dict(tp=2, dp=8, zero=3, global_batch=64, seq_len=4096, recompute="full")),
    "llama70b-megatron-interleaved": ("llama3.1-70b", "megatron", dict(tp=8, pp=4, dp=2, sp=True, zero=1, vpp=2, schedule="interleaved-1f1b", global_batch=128, seq_len=8192, recompute="full")),
    "llama70b-torchtitan-uneven": ("llama3.1-70b", "torchtitan", dict(tp=8, pp=4, dp=2, sp=True, zero=3, stage_layers=(19, 21, 21, 22), global_batch=128, seq_len=8192, recompute="full")),
    "llama70b-deepspeed": ("llama3.1-70b", "deepspeed", dict(tp=8, pp=4, dp=2, zero=1, global_batch=128, seq_len=4096, recompute="full")),
    "llama405b-megatron-uneven": ("llama3.1-405b", "megatron", dict(tp=8, pp=16, dp=8, sp=True, zero=1, global_batch=512, seq_len=8192, recompute="full")),
    "llama405b-torchtitan-cp": ("llama3.1-405b", "torchtitan", dict(tp=8, pp=8, cp=2, dp=8, sp=True, zero=3, global_batch=512, seq_len=8192, recompute="full")),
    "llama405b-deepspeed": ("llama3.1-405b", "deepspeed", dict(tp=8, pp=9, dp=8, zero=1, global_batch=512, seq_len=4096, recompute="full")),
    "gpt175b-megatron-interleaved": ("gpt3-175b", "megatron", dict(tp=8, pp=16, dp=8, sp=True, zero=1, vpp=2, schedule="interleaved-1f1b", global_batch=1536, seq_len=2048, recompute="selective")),
    "gpt175b-torchtitan": ("gpt3-175b", "torchtitan", dict(tp=8, pp=8, dp=16, sp=True, zero=3, global_batch=1536, seq_len=2048, recompute="full")),
    "gpt175b-deepspeed": ("gpt3-175b", "deepspeed", dict(tp=8, pp=16, dp=8, zero=1, global_batch=1536, seq_len=2048, recompute="full")),
    "llama8b-megatron-fp8-offload": ("llama3.1-8b", "megatron", dict(tp=2, dp=4, sp=True, zero=1, global_batch=64, seq_len=4096, recompute="none",
                                                                      precision="fp8", offload_optimizer=True, offload_activations=True)),
    "llama8b-deepspeed-offload": ("llama3.1-8b", "deepspeed", dict(tp=1, pp=2, dp=8, zero=1, global_batch=64, seq_len=4096, recompute="full",
                                                                    offload_optimizer=True, offload_activations=True)),
    "llama8b-torchtitan-offload": ("llama3.1-8b", "torchtitan", dict(dp=8, zero=3, global_batch=64, seq_len=4096, micro_batch=2, recompute="selective",
                                                                      offload_optimizer=True)),
    "deepseekv3-megatron": ("deepseek-v3", "megatron", dict(tp=8, pp=8, dp=16, ep=16, sp=True, zero=1, global_batch=1024, seq_len=4096, recompute="full")),
    "mixtral-megatron": ("mixtral-8x7b", "megatron", dict(tp=2, pp=2, dp=16, ep=8, sp=True, zero=1, global_batch=256, seq_len=4096, recompute="full")),
    "mixtral-torchtitan": ("mixtral-8x7b", "torchtitan", dict(tp=2, pp=2, dp=16, ep=8, sp=True, zero=3, global_batch=256, seq_len=4096, recompute="full")),
    "mixtral-deepspeed": ("mixtral-8x7b", "deepspeed", dict(tp=1, pp=2, dp=32, ep=8, zero=1, global_batch=256, seq_len=4096, recompute="full")),
}
"""Plans whose exports the engines' own code reads (test_engines_*.py): Llama 3.1 8B / 70B / 405B,
GPT-3 175B and Mixtral 8x7B for every export target, DeepSeek-V3 (MLA) for Megatron-LM, with
interleaved, uneven and CP plans. Each
is a valid plan for its target on DGX H100 (the tests check that first)."""
CASE_CLUSTERS = {"llama8b-megatron-fp8-offload": "grand-teton-h100", "llama8b-deepspeed-offload": "grand-teton-h100",
                 "llama8b-torchtitan-offload": "grand-teton-h100"}
"""Cases on another cluster than DGX H100 (offloading needs a cluster that states its host link)."""


@pytest.fixture(scope="session")
def engine_plans() -> Callable[[str], list[tuple[str, Plan]]]:
    """``engine_plans(target)``: the (id, plan) pairs of :data:`ENGINE_CASES` for ``target``."""
    def of(target: str) -> list[tuple[str, Plan]]:
        return [(cid, make_plan(model=m, cluster=CASE_CLUSTERS.get(cid, "dgx-h100"), target=t, **cfg)) for cid, (m, t, cfg) in ENGINE_CASES.items() if t == target]

    return of
