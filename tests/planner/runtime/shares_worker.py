"""Workers of ``test_shares.py``: a gloo world training uneven shares (importable by name for spawn)."""

from __future__ import annotations

import os
from typing import Any

import torch

STEPS, SEED, BATCH, SEQ, VOCAB = 3, 1234, 8, 16, 128
COUNTS = [3, 3, 1, 1]
"""Micro-batches (of one sequence) per rank: uneven shares of the batch of 8."""
SLOW = {3: 0.5}


def model() -> Any:
    from plan_helpers import llama_spec

    return llama_spec(2)


def reference() -> tuple[list[float], dict[str, torch.Tensor]]:
    """The one-process run: the whole batch per step, AdamW, same seed and data."""
    from planner.runtime.apply import default_optimizer, next_token_loss
    from planner.runtime.init import synthetic_tokens
    from planner.runtime.models import build_model

    torch.manual_seed(SEED)
    module = build_model(model(), device="cpu")
    opt = default_optimizer(list(module.parameters()))
    losses = []
    for step in range(STEPS):
        tokens = synthetic_tokens(SEED, step, BATCH, SEQ, VOCAB)
        opt.zero_grad()
        loss = next_token_loss(module(tokens[:, :-1]), tokens[:, 1:])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {n: p.detach().clone() for n, p in module.named_parameters()}


def worker(rank: int, world: int, port: int, out: str) -> None:
    """Train ``COUNTS`` shares (rank 3 injected at half speed); rank 0 saves losses, weights, timings."""
    import torch.distributed as dist

    from planner.runtime.apply import default_optimizer, next_token_loss
    from planner.runtime.init import synthetic_tokens
    from planner.runtime.models import build_model
    from planner.runtime.shares import ShareRuntime

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(SEED)
        module = build_model(model(), device="cpu")
        rt = ShareRuntime(module=module, optimizer=default_optimizer(list(module.parameters())), counts=COUNTS, micro_batch=1,
                          rank=rank, loss_fn=next_token_loss, speed=SLOW.get(rank, 1.0))
        losses = [rt.step(synthetic_tokens(SEED, step, BATCH, SEQ, VOCAB)) for step in range(STEPS)]
        timings: list[Any] = [None] * world
        dist.all_gather_object(timings, [(t.compute_s, t.wait_s) for t in rt.timings])
        if rank == 0:
            torch.save({"losses": losses, "params": {n: p.detach().clone() for n, p in module.named_parameters()},
                        "timings": timings}, out)
    finally:
        dist.destroy_process_group()
