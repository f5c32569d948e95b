"""A whole deployment in steady state: aggregated replicas under continuous batching, or
disaggregated prefill and decode workers.

Continuous batching (Yu et al., "Orca", OSDI'22; chunked prefill, Agrawal et al., "Sarathi-Serve",
OSDI'24): with b sequences in flight, every request costs one prefill and ``osl`` decode steps, so
one cycle of b requests takes osl·t_decode(b) + b·t_prefill; each user sees a token every
cycle / osl. Little's law (Little 1961, L = λW) ties them: b = requests/s x cycle. Disaggregation
(DistServe, Zhong et al. OSDI'24 §3; Splitwise, Patel et al. ISCA'24): prefill workers and decode
workers each run their phase alone; the deployment delivers the slower of the two rates, TTFT adds
the KV transfer, TPOT is the decode step alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.serving.comm import kv_transfer
from costmodel.serving.engines import EngineDefaults
from costmodel.serving.host import host_step_seconds, token_seconds
from costmodel.serving.kvcache import kv_bytes_per_token, max_sequences, sequence_tokens
from costmodel.serving.memory import GpuMemory, gpu_memory
from costmodel.serving.shape import ModelShape
from costmodel.serving.specs import Instance, WeightPrecision
from costmodel.serving.step import Hardware, StepParts, decode_step_parts, mx_storage, prefill_time


@dataclass(frozen=True)
class Workload:
    """What every request looks like and how it is stored."""

    isl: int
    osl: int
    precision: WeightPrecision
    kv_element_bytes: float


@dataclass(frozen=True)
class Phase:
    """One kind of worker: its instance, how many, its memory and its in-flight sequences."""

    instance: Instance
    workers: int
    memory: GpuMemory
    max_concurrency: int
    """Sequences one worker's KV cache holds (0 when the weights do not fit)."""
    concurrency: int
    """Sequences in flight per worker (decode), or prompts per prefill batch."""
    sequence_kv_bytes: float = 0.0
    """KV bytes one whole sequence (isl + osl tokens, rounded up to the engine's blocks) needs on one GPU."""

    @property
    def shortfall(self) -> float:
        """Bytes per GPU missing before one sequence runs: the weights, workspace and runtime over the
        capacity, else the one sequence's KV cache over what the engine leaves for KV (0 when it fits)."""
        if self.memory.shortfall > 0:
            return self.memory.shortfall
        if self.max_concurrency > 0:
            return 0.0
        return max(self.sequence_kv_bytes - max(self.memory.kv_cache, 0.0), 0.0)


@dataclass(frozen=True)
class Estimate:
    """A deployment's predicted steady state."""

    output_tokens_per_s: float
    gpus: int
    ttft_s: float
    tpot_s: float
    concurrency: int
    """Sequences in flight in the whole deployment."""
    max_concurrency: int
    decode: Phase
    prefill: Phase | None
    """None for an aggregated deployment."""
    parts: StepParts
    """The decode step's parts at the chosen batch."""
    prefill_share: float
    """Share of each cycle spent on prefill (aggregated), or prefill-bound flag 1/0 (disaggregated)."""

    @property
    def fits(self) -> bool:
        """Weights, workspace and runtime fit, and the KV cache holds at least one whole sequence."""
        phases = [self.decode] + ([self.prefill] if self.prefill is not None else [])
        return all(p.memory.fits and p.max_concurrency > 0 for p in phases)

    @property
    def per_gpu(self) -> float:
        return self.output_tokens_per_s / self.gpus

    @property
    def tokens_per_s_per_user(self) -> float:
        return 1.0 / self.tpot_s if self.tpot_s > 0 else 0.0

    @property
    def bottleneck(self) -> str:
        """``compute``, ``memory bandwidth`` or ``communication``: the largest part of the step
        (prefill counts as compute)."""
        p = self.parts
        compute = p.compute + self.prefill_share * p.total
        ranked = {"compute": compute, "memory bandwidth": p.traffic, "communication": p.comm}
        return max(ranked, key=lambda key: ranked[key])


def worker_phase(hw: Hardware, shape: ModelShape, instance: Instance, workers: int, work: Workload,
           engine: EngineDefaults) -> Phase:
    memory = gpu_memory(hw.cluster, shape, instance, work.precision, engine, mx_storage(hw, work.precision),
                        hw.fp4_experts_only, hw.fp4_moe_only)
    tokens = sequence_tokens(work.isl + work.osl, engine.block_tokens)
    per_token = kv_bytes_per_token(shape, instance, work.kv_element_bytes, work.isl + work.osl)
    share = instance.tp if instance.attention_dp else 1
    most = min(max_sequences(memory.kv_cache, per_token, tokens, share), engine.max_batch * share)
    return Phase(instance=instance, workers=workers, memory=memory, max_concurrency=most, concurrency=most,
                 sequence_kv_bytes=per_token * tokens)


def prefill_per_request(hw: Hardware, shape: ModelShape, instance: Instance, work: Workload,
                         prompts: float, engine: EngineDefaults) -> float:
    """Seconds of prefill one request costs when its step carries ``prompts`` prompts, at most
    ``max_num_tokens`` tokens of them (a longer prompt runs alone, in chunks)."""
    chunk = max(work.isl, min(engine.max_num_tokens, prompts * work.isl))
    return prefill_time(hw, shape, instance, chunk, work.isl, work.precision) * work.isl / chunk


def prompts_per_prefill_step(batch: int, osl: int) -> float:
    """Prompts one prefill step of an aggregated instance carries in steady state. By Little's law
    (L = λW; Little 1961) ``batch`` sequences that each last ``osl`` decode steps finish, and are
    replaced by new requests, at batch/osl requests per step; an iteration-level scheduler admits
    the prompts waiting at every step (Yu et al., "Orca", OSDI'22 §3.1; vLLM, SGLang and
    TensorRT-LLM schedule waiting requests each iteration), so a step carries the ~batch/osl that
    arrived since the last one, and at least the one prompt that makes it a prefill step. The
    weights a prefill reads are shared by that many prompts, not by the whole batch."""
    return max(1.0, batch / max(osl, 1))


def _batch(most: int, concurrency: int | None, workers: int) -> int:
    """Sequences in flight per worker: the asked concurrency shared by the workers, at most what the
    KV cache holds (more requests wait in the queue, as the engines' schedulers make them)."""
    if concurrency is None:
        return max(most, 1)
    return max(1, min(concurrency // workers, most) if most > 0 else concurrency // workers)


def admission_wait(asked: int | None, running: int, requests_per_s: float) -> float:
    """Mean time a request waits for a slot when a closed-loop client keeps ``asked`` requests
    outstanding but the engine runs only ``running`` (the KV cache or the scheduler's sequence cap
    admits no more): the ``asked − running`` waiting requests drain at the completion rate, so by
    Little's law (L = λW; Little 1961) each waits (asked − running) / λ before its prefill starts.
    0 when every asked request runs."""
    if asked is None or asked <= running or requests_per_s <= 0:
        return 0.0
    return (asked - running) / requests_per_s


def aggregated(hw: Hardware, shape: ModelShape, instance: Instance, replicas: int, work: Workload,
               engine: EngineDefaults, concurrency: int | None = None) -> Estimate:
    """``replicas`` instances, each batching prefill and decode together; ``concurrency`` is the
    whole deployment's in-flight sequences (None: each instance's largest batch that fits). A step
    lasts at least the engine's host work for the batch (:mod:`costmodel.serving.host`)."""
    phase = worker_phase(hw, shape, instance, replicas, work, engine)
    batch = _batch(phase.max_concurrency, concurrency, replicas)
    parts = decode_step_parts(hw, shape, instance, batch, work.isl + work.osl / 2.0, work.precision, work.kv_element_bytes)
    prompts = prompts_per_prefill_step(batch, work.osl)
    pre = prefill_per_request(hw, shape, instance, work, prompts, engine) + hw.efficiency.request_overhead_us * 1e-6
    cycle = work.osl * token_seconds(work.osl * parts.total + batch * pre, work.osl,
                                     host_step_seconds(engine, instance, batch))
    rate = replicas * batch * work.osl / cycle
    ttft = prefill_time(hw, shape, instance, work.isl, work.isl, work.precision) + parts.total
    ttft += admission_wait(concurrency, batch * replicas, rate / work.osl)
    return Estimate(output_tokens_per_s=rate, gpus=replicas * instance.gpus, ttft_s=ttft, tpot_s=cycle / work.osl,
                    concurrency=batch * replicas, max_concurrency=phase.max_concurrency * replicas,
                    decode=Phase(instance, replicas, phase.memory, phase.max_concurrency, batch, phase.sequence_kv_bytes), prefill=None,
                    parts=parts, prefill_share=batch * pre / cycle)


PREFILL_LOAD_MAX = 0.9
"""Highest share of their capacity the prefill workers are loaded with: at full load their queue
(and TTFT) grows without bound [assumption; the search trades load against a TTFT target below it]."""


def prefill_queue_wait(load_rps: float, capacity_rps: float) -> float:
    """Mean wait of a prompt for a prefill worker: M/D/1 with the workers pooled, W = ρ / (2μ(1 − ρ))
    (Pollaczek-Khinchine formula with deterministic service; Kleinrock, "Queueing Systems" vol. 1,
    §5.6), ρ = load / capacity. Infinite at full load."""
    if capacity_rps <= 0:
        return float("inf")
    rho = load_rps / capacity_rps
    return float("inf") if rho >= 1.0 else rho / (2.0 * capacity_rps * (1.0 - rho))


def disaggregated(hw: Hardware, shape: ModelShape, prefill: Instance, prefill_workers: int, decode: Instance,
                  decode_workers: int, work: Workload, engine: EngineDefaults,
                  concurrency: int | None = None) -> Estimate:
    """Prefill workers feed decode workers; the deployment runs at the slower side's request rate
    (prefill loaded to at most :data:`PREFILL_LOAD_MAX`), and prompts queue for prefill
    (:func:`prefill_queue_wait`)."""
    pre_phase = worker_phase(hw, shape, prefill, prefill_workers, work, engine)
    prompts = min(pre_phase.max_concurrency, max(1, engine.max_num_tokens // work.isl))
    pre_phase = Phase(prefill, prefill_workers, pre_phase.memory, pre_phase.max_concurrency, prompts,
                      pre_phase.sequence_kv_bytes)
    dec_phase = worker_phase(hw, shape, decode, decode_workers, work, engine)
    batch = _batch(dec_phase.max_concurrency, concurrency, decode_workers)
    parts = decode_step_parts(hw, shape, decode, batch, work.isl + work.osl / 2.0, work.precision, work.kv_element_bytes)
    step = max(parts.total, host_step_seconds(engine, decode, batch))
    decode_rps = decode_workers * batch / (work.osl * step)
    per_request = prefill_per_request(hw, shape, prefill, work, engine.max_num_tokens, engine)
    prefill_rps = prefill_workers / (per_request + hw.efficiency.request_overhead_us * 1e-6)
    kv = work.isl * kv_bytes_per_token(shape, Instance(), work.kv_element_bytes, work.isl)
    rate = min(decode_rps, prefill_rps * PREFILL_LOAD_MAX)
    ttft = prefill_time(hw, shape, prefill, work.isl, work.isl, work.precision) + kv_transfer(hw.cluster, kv, prefill.gpus)
    ttft += prefill_queue_wait(rate, prefill_rps) + admission_wait(concurrency, batch * decode_workers, rate)
    gpus = prefill_workers * prefill.gpus + decode_workers * decode.gpus
    return Estimate(output_tokens_per_s=rate * work.osl, gpus=gpus, ttft_s=ttft,
                    tpot_s=step, concurrency=batch * decode_workers,
                    max_concurrency=dec_phase.max_concurrency * decode_workers,
                    decode=Phase(decode, decode_workers, dec_phase.memory, dec_phase.max_concurrency, batch,
                                 dec_phase.sequence_kv_bytes),
                    prefill=pre_phase, parts=parts, prefill_share=1.0 if rate < decode_rps else 0.0)
