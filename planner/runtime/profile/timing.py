"""Timing of one operation on one device, the way kernel benchmarks do it.

Warm-up calls first (allocator, kernel selection, caches), then ``repeats`` timed batches of
``iters`` calls each; the result is the median batch time divided by ``iters`` (the median resists a
neighbour's burst on a shared machine). CUDA work is asynchronous, so a batch is bracketed by
``torch.cuda.synchronize()`` (the pattern of ``torch.utils.benchmark.Timer`` and of nccl-tests'
``cudaStreamSynchronize`` around a timed loop); on CPU ``time.perf_counter`` brackets it directly.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Budget:
    """How hard to measure: calls per timed batch, batches, and warm-up calls."""

    iters: int = 5
    repeats: int = 3
    warmup: int = 2


def synchronize(device: torch.device) -> None:
    """Wait for queued work on ``device`` (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], device: torch.device, budget: Budget) -> float:
    """Median seconds of one call of ``fn`` on ``device`` (see the module doc)."""
    for _ in range(budget.warmup):
        fn()
    synchronize(device)
    batches = []
    for _ in range(budget.repeats):
        start = time.perf_counter()
        for _ in range(budget.iters):
            fn()
        synchronize(device)
        batches.append((time.perf_counter() - start) / budget.iters)
    return statistics.median(batches)
