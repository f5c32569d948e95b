"""Search every serving deployment and pick the fastest per GPU that meets the latency targets.

Sections: the space (``space.py``), pricing aggregated replicas, pricing disaggregated worker mixes
(each side priced once per instance and batch, then every worker count combined arithmetically),
the Pareto frontier, the result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from costmodel.serving.comm import kv_transfer
from costmodel.serving.deployment import (
    PREFILL_LOAD_MAX,
    Workload,
    prefill_per_request,
    prefill_queue_wait,
    prompts_per_prefill_step,
    worker_phase,
)
from costmodel.serving.engines import EngineDefaults
from costmodel.serving.host import host_step_seconds, token_seconds
from costmodel.serving.kvcache import kv_bytes_per_token
from costmodel.serving.shape import ModelShape
from costmodel.serving.specs import Instance
from costmodel.serving.step import Hardware, decode_step_time, prefill_time
from search.serving.space import batches, instances
from search.serving.types import Candidate


@dataclass(frozen=True)
class ServingTargets:
    """Latency targets (None: no target) and whether to try disaggregation."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    disaggregation: str = "auto"
    """``auto`` tries both, ``on`` only disaggregated, ``off`` only aggregated."""
    max_batch: int | None = None
    """The most sequences one (aggregated or decode) worker may run at once, below what its memory and
    the engine allow (None: no cap of the request's own)."""

    def met(self, ttft_s: float, tpot_s: float) -> bool:
        return (self.ttft_s is None or ttft_s <= self.ttft_s) and (self.tpot_s is None or tpot_s <= self.tpot_s)

    def miss(self, ttft_s: float, tpot_s: float) -> float:
        """How far a deployment is from the targets: the larger latency over its target (<= 1: met)."""
        ratios = [1.0]
        if self.ttft_s:
            ratios.append(ttft_s / self.ttft_s)
        if self.tpot_s:
            ratios.append(tpot_s / self.tpot_s)
        return max(ratios)


@dataclass(frozen=True)
class ServingSearchResult:
    ranked: list[Candidate]
    """Deployments meeting the targets, best first."""
    frontier: list[Candidate]
    """Pareto frontier of every deployment that fits: no other is both faster per GPU and per user."""
    nearest_miss: Candidate | None
    """When nothing meets the targets: the fitting deployment closest to them."""
    smallest_shortfall_bytes: float
    """When nothing fits: the least memory a GPU lacks for weights + workspace + runtime."""
    candidates: int
    wall_time_s: float
    fitting: list[Candidate] = field(default_factory=list)


@dataclass
class _Ctx:
    hw: Hardware
    shape: ModelShape
    work: Workload
    engine: EngineDefaults
    gpus: int
    targets: ServingTargets
    shortfall: float = float("inf")
    priced: int = 0


def _fits(ctx: _Ctx, inst: Instance) -> int:
    """Sequences one worker holds (0: does not fit; the shortfall is recorded)."""
    phase = worker_phase(ctx.hw, ctx.shape, inst, 1, ctx.work, ctx.engine)
    if phase.max_concurrency <= 0:
        ctx.shortfall = min(ctx.shortfall, phase.memory.shortfall or 1.0)
    return phase.max_concurrency


def _context(ctx: _Ctx) -> float:
    return ctx.work.isl + ctx.work.osl / 2.0


def _decode_points(ctx: _Ctx, inst: Instance, most: int) -> list[tuple[int, float]]:
    """(batch, decode step seconds) for each batch tried."""
    out = []
    for b in batches(most):
        ctx.priced += 1
        out.append((b, decode_step_time(ctx.hw, ctx.shape, inst, b, _context(ctx), ctx.work.precision,
                                        ctx.work.kv_element_bytes)))
    return out


def _aggregated(ctx: _Ctx, inst: Instance, most: int) -> list[Candidate]:
    """Aggregated replicas of ``inst`` on every GPU they fill, at each batch."""
    replicas = ctx.gpus // inst.gpus
    work, eff = ctx.work, ctx.hw.efficiency
    ttft_alone = prefill_time(ctx.hw, ctx.shape, inst, work.isl, work.isl, work.precision)
    out = []
    for b, step in _decode_points(ctx, inst, most):
        prompts = prompts_per_prefill_step(b, work.osl)
        pre = prefill_per_request(ctx.hw, ctx.shape, inst, work, prompts, ctx.engine) + eff.request_overhead_us * 1e-6
        tpot = token_seconds(work.osl * step + b * pre, work.osl, host_step_seconds(ctx.engine, inst, b))
        cycle = work.osl * tpot
        ttft = ttft_alone + step
        out.append(Candidate(decode=inst, decode_workers=replicas, batch=b, gpus=replicas * inst.gpus,
                             per_gpu=b * work.osl / cycle / inst.gpus, ttft_s=ttft, tpot_s=tpot,
                             meets=ctx.targets.met(ttft, tpot)))
    return out


def _prefill_side(ctx: _Ctx, inst: Instance) -> tuple[float, float]:
    """(TTFT seconds incl. KV transfer, requests/s of one prefill worker)."""
    work = ctx.work
    per_request = prefill_per_request(ctx.hw, ctx.shape, inst, work, ctx.engine.max_num_tokens, ctx.engine)
    kv = work.isl * kv_bytes_per_token(ctx.shape, Instance(), work.kv_element_bytes, work.isl)
    ttft = prefill_time(ctx.hw, ctx.shape, inst, work.isl, work.isl, work.precision) + kv_transfer(ctx.hw.cluster, kv, inst.gpus)
    return ttft, 1.0 / (per_request + ctx.hw.efficiency.request_overhead_us * 1e-6)


LOADS = (0.3, 0.5, 0.7, 0.8, PREFILL_LOAD_MAX)
"""Prefill loads tried for each prefill worker count (the decode count follows from the load)."""


def _mixes(ctx: _Ctx, gp: int, rp: float, gd: int, rd: float) -> list[tuple[int, int, float, float]]:
    """(prefill workers, decode workers, requests/s, prefill queue wait s) of the mixes worth trying on
    at most ``gpus`` GPUs: for each prefill count, the decode counts that load prefill to each of
    :data:`LOADS` (fewer decode workers: less throughput, shorter prefill queue)."""
    out = []
    for a in range(1, (ctx.gpus - gd) // gp + 1):
        most_b = (ctx.gpus - a * gp) // gd
        counts = {max(1, min(most_b, int(load * a * rp / rd) + extra)) for load in LOADS for extra in (0, 1)}
        for b in sorted(counts):
            rate = min(b * rd, a * rp * PREFILL_LOAD_MAX)
            out.append((a, b, rate, prefill_queue_wait(rate, a * rp)))
    return out


def _best_mix(ctx: _Ctx, gp: int, rp: float, gd: int, rd: float, ttft: float,
              tpot: float) -> tuple[int, int, float, float] | None:
    """The mix with the most output tokens/s per GPU, among those meeting the targets when any does:
    (prefill workers, decode workers, tokens/s per GPU, TTFT)."""
    best, best_key = None, None
    for a, b, rate, wait in _mixes(ctx, gp, rp, gd, rd):
        per_gpu = rate * ctx.work.osl / (a * gp + b * gd)
        key = (ctx.targets.met(ttft + wait, tpot), per_gpu, -b)
        if best_key is None or key > best_key:
            best, best_key = (a, b, per_gpu, ttft + wait), key
    return best


def _disaggregated(ctx: _Ctx, fitting: list[tuple[Instance, int]]) -> list[Candidate]:
    """Every prefill instance with every decode instance and batch, in their best worker mix."""
    prefill = [(inst, *_prefill_side(ctx, inst)) for inst, _ in fitting if inst.gpus < ctx.gpus]
    out = []
    for dec, most in fitting:
        for b, gpu_step in _decode_points(ctx, dec, most):
            step = max(gpu_step, host_step_seconds(ctx.engine, dec, b))
            rd = b / (ctx.work.osl * step)
            for pre, ttft, rp in prefill:
                ctx.priced += 1
                mix = _best_mix(ctx, pre.gpus, rp, dec.gpus, rd, ttft, step)
                if mix is None:
                    continue
                a, w, per_gpu, queued = mix
                out.append(Candidate(decode=dec, decode_workers=w, batch=b, per_gpu=per_gpu, ttft_s=queued, tpot_s=step,
                                     gpus=a * pre.gpus + w * dec.gpus, meets=ctx.targets.met(queued, step),
                                     prefill=pre, prefill_workers=a))
    return out


def pareto(points: list[Candidate]) -> list[Candidate]:
    """Candidates no other beats on both throughput per GPU and tokens/s per user, by tokens per user."""
    ordered = sorted(points, key=lambda c: (-c.tokens_per_user, -c.per_gpu, c.label))
    front: list[Candidate] = []
    for c in ordered:
        if not front or c.per_gpu > front[-1].per_gpu + 1e-9:
            front.append(c)
    return sorted(front, key=lambda c: (c.tokens_per_user, c.label))


def search_serving(hw: Hardware, shape: ModelShape, work: Workload, engine: EngineDefaults, gpus: int,
                   targets: ServingTargets) -> ServingSearchResult:
    """Price every deployment on at most ``gpus`` GPUs; see the module docstring."""
    start = time.perf_counter()
    ctx = _Ctx(hw=hw, shape=shape, work=work, engine=engine, gpus=gpus, targets=targets)
    fitting = [(inst, min(most, targets.max_batch or most)) for inst in instances(shape, gpus, hw.cluster.gpus_per_node)
               if (most := _fits(ctx, inst)) > 0]
    points: list[Candidate] = []
    if targets.disaggregation != "on":
        for inst, most in fitting:
            points += _aggregated(ctx, inst, most)
    if targets.disaggregation != "off" and gpus > 1:
        points += _disaggregated(ctx, fitting)
    ranked = sorted((c for c in points if c.meets), key=Candidate.key)
    nearest = None
    if not ranked and points:
        nearest = min(points, key=lambda c: (targets.miss(c.ttft_s, c.tpot_s), *c.key()))
    return ServingSearchResult(ranked=ranked, frontier=pareto(points), nearest_miss=nearest,
                               smallest_shortfall_bytes=0.0 if fitting else ctx.shortfall,
                               candidates=ctx.priced, wall_time_s=time.perf_counter() - start, fitting=points)
