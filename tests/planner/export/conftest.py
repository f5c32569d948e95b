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
from planner.inputs import resolve_cluster_arg, resolve_model_arg
from planner.plans import build_plan
from planner.schema import Plan
from search.types import Candidate, SearchRequest, SearchResult, SearchStats

GOLDEN = Path(__file__).parent / "golden"
UPDATE = "MESHPLAN_UPDATE_GOLDEN"
"""Set to 1 to rewrite the golden files from the current output (then review the diff)."""


def make_plan(model: str = "llama3.1-8b", cluster: str = "dgx-h100", target: str = "native",
              alternatives: tuple[dict[str, Any], ...] = (), **config: Any) -> Plan:
    """The plan meshplan writes when the search picks ``config`` (and keeps ``alternatives``)."""
    spec, hw = resolve_model_arg(model), resolve_cluster_arg(cluster)
    table = build_cost_table(spec, hw)
    cfg = ParallelConfig(**config)
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
