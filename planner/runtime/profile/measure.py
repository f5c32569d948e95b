"""Run every microbenchmark on every rank and collect the rows (``records``).

Compute benchmarks run on all ranks at once (training shares the node the same way) and keep the
median over ranks; collectives keep the slowest rank. Works with or without an initialised process
group (one process measures compute and memory only).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

import planner.runtime.profile.collectives as coll
import planner.runtime.profile.compute as compute
from planner.runtime.profile.derive import attention_efficiency
from planner.runtime.profile.hardware import DeviceFacts
from planner.runtime.profile.headroom import allocator_headroom_fraction
from planner.runtime.profile.options import ProfileOptions
from planner.runtime.profile.records import AttentionPoint, CollectivePoint, GemmPoint, MemoryPoint
from planner.runtime.profile.timing import Budget, time_call

Progress = Callable[[int, int, str], None]
"""``progress(done, total, label)``: called before each benchmark (the CLI draws a bar on stderr)."""


@dataclass
class Measurements:
    """Every row one profile run measured, the same on every rank."""

    world: int
    ranks_per_node: int
    gemm: list[GemmPoint] = field(default_factory=list)
    attention: list[AttentionPoint] = field(default_factory=list)
    memory: list[MemoryPoint] = field(default_factory=list)
    collectives: list[CollectivePoint] = field(default_factory=list)
    kernel_overhead_s: float = 0.0
    step_sync_s: float = 0.0
    """One barrier plus a one-element all-reduce (what a training step synchronises on its loss)."""
    headroom_fraction: float | None = None
    """The caching allocator's reserve beyond allocation over a synthetic step, as a share of the
    allocated peak (``planner.runtime.profile.headroom``); None on a CPU."""
    wall_s: float = 0.0


class _Ticker:
    """Counts benchmarks for the progress callback."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total, self.done, self.progress = total, 0, progress

    def __call__(self, label: str) -> None:
        if self.progress is not None:
            self.progress(self.done, self.total, label)
        self.done += 1


def measure(options: ProfileOptions, facts: DeviceFacts, device: torch.device, progress: Progress | None = None) -> Measurements:
    """Run the benchmarks of ``options`` on ``device``; every rank of the group must call it."""
    start = time.perf_counter()
    distributed = dist.is_available() and dist.is_initialized()
    world = dist.get_world_size() if distributed else 1
    groups = coll.build_groups(world, facts.ranks_per_node) if distributed else None
    scopes = groups.scopes() if groups else []
    shapes = compute.transformer_gemms(options.hidden_sizes, options.tokens, options.tp_degrees)
    attn = [(s, d) for s in options.attention_seq_lens for d in options.attention_head_dims]
    total = (len(shapes) * len(facts.gemm_dtypes) + len(attn) + len(compute.attention_backends(device))
             + len(options.memory_bytes) + 2 + len(scopes) * len(coll.OPS) * len(options.collective_bytes))
    tick = _Ticker(total, progress)
    out = Measurements(world=world, ranks_per_node=facts.ranks_per_node)
    out.kernel_overhead_s = _median(distributed, [_overhead(device, options, tick)])[0]
    out.gemm = _gemms(shapes, facts, device, options.compute_budget, tick, distributed)
    out.attention = _attention(attn, facts, device, options, out.kernel_overhead_s, tick, distributed)
    out.memory = _memory(options, device, tick, distributed)
    out.headroom_fraction = allocator_headroom_fraction(device)
    for scope, group, ranks in scopes:
        out.collectives += _collectives(scope, group, ranks, options, device, tick)
    tick("step synchronisation")
    out.step_sync_s = _step_sync(device, options.comm_budget) if distributed else 0.0
    if progress is not None:
        progress(total, total, "done")
    out.wall_s = time.perf_counter() - start
    return out


def _median(distributed: bool, values: list[float]) -> list[float]:
    return coll.median_over_ranks(values) if distributed else values


def _overhead(device: torch.device, options: ProfileOptions, tick: _Ticker) -> float:
    tick("kernel launch overhead")
    return compute.time_small_kernel(device, options.kernel_calls)


def _gemms(shapes: list[compute.GemmShape], facts: DeviceFacts, device: torch.device, budget: Budget, tick: _Ticker, distributed: bool) -> list[GemmPoint]:
    rows: list[tuple[compute.GemmShape, torch.dtype]] = [(s, d) for d in facts.gemm_dtypes for s in shapes]
    times = []
    for shape, dtype in rows:
        tick(f"GEMM {shape.role} {shape.label} {_dtype_name(dtype)}")
        times.append(compute.time_gemm(shape, dtype, device, budget))
    times = _median(distributed, times)
    return [
        GemmPoint(role=s.role, shape=s.label, m=s.m, n=s.n, k=s.k, dtype=_dtype_name(d), time_s=t, tflops=s.flops / t / 1e12)
        for (s, d), t in zip(rows, times)
    ]


def _attention(shapes: list[tuple[int, int]], facts: DeviceFacts, device: torch.device, options: ProfileOptions,
               overhead_s: float, tick: _Ticker, distributed: bool) -> list[AttentionPoint]:
    """SDPA's own choice at every shape, then each forced backend at the middle shape."""
    middle = shapes[len(shapes) // 2]
    plan = [("default", s, d) for s, d in shapes] + [(b, *middle) for b in compute.attention_backends(device)]
    times = []
    for backend, seq, dim in plan:
        tick(f"attention {backend} s{seq} d{dim}")
        batch = max(1, options.attention_tokens // seq)
        t = compute.time_attention(backend, batch, options.attention_heads, seq, dim, facts.compute_dtype, device, options.compute_budget)
        times.append(-1.0 if t is None else t)
    times = _median(distributed, times)
    peak = (facts.peak_tflops or 1.0) * 1e12
    rows = []
    for (backend, seq, dim), t in zip(plan, times):
        if t <= 0:
            continue
        batch = max(1, options.attention_tokens // seq)
        flops = compute.attention_flops(batch, options.attention_heads, seq, dim)
        rows.append(AttentionPoint(
            backend=backend, batch=batch, heads=options.attention_heads, seq_len=seq, head_dim=dim,
            dtype=_dtype_name(facts.compute_dtype), time_s=t, tflops=flops / t / 1e12,
            efficiency=attention_efficiency(flops, t, dim, peak, overhead_s),
        ))
    return rows


def _memory(options: ProfileOptions, device: torch.device, tick: _Ticker, distributed: bool) -> list[MemoryPoint]:
    times = []
    for nbytes in options.memory_bytes:
        tick(f"memory copy {nbytes // 1024**2} MiB")
        times.append(compute.time_copy(nbytes, device, options.compute_budget))
    times = _median(distributed, times)
    return [MemoryPoint(op="copy", bytes=b, time_s=t, gbps=2 * b / t / 1e9) for b, t in zip(options.memory_bytes, times)]


def _collectives(scope: str, group: dist.ProcessGroup, ranks: list[int], options: ProfileOptions, device: torch.device, tick: _Ticker) -> list[CollectivePoint]:
    rows = []
    n = len(ranks)
    for op in coll.OPS:
        for nbytes in options.collective_bytes:
            tick(f"{scope} {op} {nbytes} B")
            size, mine = coll.time_collective(op, nbytes, group, ranks, device, options.comm_budget)
            seconds = coll.slowest(mine, device)
            algbw = size / seconds / 1e9
            rows.append(CollectivePoint(op=op, scope=scope, ranks=n if op != "send_recv" else 2, bytes=size, time_s=seconds,  # type: ignore[arg-type]
                                        algbw_gbps=algbw, busbw_gbps=algbw * coll.BUS_FACTOR[op](n)))
    return rows


def _step_sync(device: torch.device, budget: Budget) -> float:
    loss = torch.ones(1, device=device)

    def sync() -> None:
        dist.barrier()
        dist.all_reduce(loss)
        loss.item()

    return coll.slowest(time_call(sync, device, budget), device)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
