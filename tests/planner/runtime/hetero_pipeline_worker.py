"""Workers of ``test_hetero_pipeline.py``: a gloo world training heterogeneous pipelined plans
(importable by name for the forkserver)."""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp

from equality import _PRELOAD, SEED, STEPS, VOCAB, free_port


def worker(rank: int, world: int, port: int, out: str, jobs: list[tuple[str, str, str, dict[int, float]]]) -> None:
    """Train every ``(name, model, plan JSON, slowdowns)`` job; each rank saves its losses, its
    parameters (unsplit names), its role and its timings."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    import planner
    from planner.plans.schema import Plan
    from planner.runtime.hetero_pipeline import PipeRuntime
    from planner.runtime.shares import apply_shares
    from planner.runtime.init import synthetic_tokens
    from planner.runtime.models import build_model
    from planner.runtime.stage import ROOT

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for name, model, plan_json, slow in jobs:
            plan = Plan.model_validate_json(plan_json)
            torch.manual_seed(SEED)
            module = build_model(model, device="cpu")
            apply = planner.apply if plan.hetero is not None else apply_shares  # a uniform plan: as meshplan run --inject-slowdown
            rt = apply(plan, module, speed=slow.get(rank, 1.0))
            assert isinstance(rt, PipeRuntime)
            losses = [rt.step(synthetic_tokens(SEED, s, plan.request.global_batch, plan.request.seq_len, VOCAB)) for s in range(STEPS)]
            params = {n.removeprefix(ROOT): (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone()
                      for n, p in rt.stage.named_parameters()}
            torch.save({"losses": losses, "params": params, "replica": rt.role.replica, "layers": rt.role.layers, "tp_rank": rt.role.tp_rank,
                        "timings": [(t.compute_s, t.wait_s, t.sync_s) for t in rt.timings], "p2p": rt.p2p},
                       Path(out) / f"{name}.rank{rank}.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


def run_world(world: int, jobs: list[tuple[str, str, str, dict[int, float]]], out: Path) -> None:
    """Train ``jobs`` in one gloo world of ``world`` processes."""
    multiprocessing.set_forkserver_preload(_PRELOAD)
    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    mp.start_processes(worker, args=(world, free_port(), str(out), jobs), nprocs=world, start_method="forkserver")


def results(out: Path, name: str, world: int) -> list[dict[str, Any]]:
    """Every rank's saved results of job ``name``, rank order."""
    return [torch.load(out / f"{name}.rank{r}.pt") for r in range(world)]
