"""Shared by the tests that check that reading a plan never builds the model it names (issue 13):
a factory file that records being imported, and the plan file of a fixed configuration of a model."""

from __future__ import annotations

from pathlib import Path

from costmodel.specs import ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
from planner.plans.build import build_plan
from search.types import Candidate, SearchRequest, SearchResult, SearchStats

FACTORY = '''
import pathlib
from torch import nn
pathlib.Path(__file__).with_name("ran").write_text("x")
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(64, 256), nn.Linear(256, 64)
    def forward(self, x):
        return x + self.b(self.a(x).relu())
def make(blocks=4):
    return nn.Sequential(nn.Embedding(512, 64), *[Block() for _ in range(blocks)], nn.Linear(64, 512))
def make5():
    return make(5)
'''
"""A model factory (``make``: four blocks, ``make5``: five) that writes ``ran`` beside its file when imported."""


def fixed_plan_file(folder: Path, arg: str) -> Path:
    """``folder/plan.json``: the plan of ``arg`` at dp 8, ZeRO-1 on 8 H100s, as the search writes it."""
    spec, hw = resolve_model_arg(arg), resolve_cluster_arg("dgx-h100")
    cfg = ParallelConfig(dp=8, zero=1, global_batch=64, seq_len=1024)
    req = SearchRequest(gpus=8, global_batch=64, seq_len=1024, target="native", top_k=0)
    stats = SearchStats(evaluated=1, pruned=0, solver="fixture", status="optimal", gap=0.0, wall_time_s=0.0)
    plan = build_plan(arg, spec, hw, req, SearchResult(Candidate(cfg, estimate_step(build_cost_table(spec, hw), cfg)), (), stats), False)
    path = folder / "plan.json"
    path.write_text(plan.to_json())
    return path
