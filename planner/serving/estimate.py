"""``planner.serve_estimate``: the steady state of one aggregated or disaggregated deployment."""

from __future__ import annotations

from typing import Any

from costmodel.serving.deployment import (
    Estimate,
    Phase,
    Workload,
    aggregated,
    disaggregated,
)
from costmodel.serving.memory import GIB
from planner.errors import InputError
from planner.serving.request import Context, context, make_instance
from planner.serving.schema import Deployment, MemoryGib, ServeEstimate, WorkerGroup

ASSUMPTIONS = (
    "uniform routing: a decode batch of b tokens touches E(1-(1-k/E)^b) of E experts",
    "continuous batching in steady state: each request costs one prefill and osl decode steps (Little's law)",
    "decode context = isl + osl/2 tokens on average; causal prefill attends to isl/2 keys on average",
    "embedding and output head in bf16; the blocks' linear layers at the weight precision",
    "fp4 on a GPU without FP4 tensor cores is weight-only MXFP4 (bf16 GEMMs); on AMD CDNA3 the vector ALUs "
    "upcast each weight tile per 32-row block of the batch; gpt-oss's fp4 is its MXFP4 experts alone (attention bf16), "
    "their GEMMs at the engine's activation format; DeepSeek's fp4 is NVFP4 on the MoE layers' experts alone",
    "TP all-reduce as the engine runs it: vLLM / SGLang one-shot or two-shot custom kernels by size, "
    "TensorRT-LLM one-shot, two-shot or NCCL as its tuned lookup table picks",
    "a TensorRT-LLM step lasts at least its executor loop's host work, 29.4 us per request a rank holds "
    "(TensorRT-LLM PR 10273's measured host step); vLLM and SGLang: no host bound",
)


def workload(ctx: Context) -> Workload:
    return Workload(isl=ctx.isl, osl=ctx.osl, precision=ctx.precision, kv_element_bytes=ctx.kv_element_bytes)  # type: ignore[arg-type]


def _memory(phase: Phase) -> MemoryGib:
    m = phase.memory
    return MemoryGib(weights=round(m.weights / GIB, 3), kv_cache=round(max(m.kv_cache, 0.0) / GIB, 3),
                     activations_workspace=round(m.workspace / GIB, 3), runtime=round(m.runtime / GIB, 3),
                     capacity=round(m.capacity / GIB, 3))


def _group(phase: Phase, role: str) -> WorkerGroup:
    inst = phase.instance
    return WorkerGroup(role=role, workers=phase.workers, tp=inst.tp, pp=inst.pp, ep=inst.ep,  # type: ignore[arg-type]
                       attention_dp=inst.attention_dp, gpus_per_worker=inst.gpus,
                       concurrency_per_worker=phase.concurrency, max_concurrency_per_worker=phase.max_concurrency,
                       memory_gib=_memory(phase))


def to_result(ctx: Context, est: Estimate, asked: int | None = None) -> ServeEstimate:
    """The pydantic result of a cost-model estimate (rounded: the same inputs print the same bytes)."""
    if est.prefill is None:
        groups = [_group(est.decode, "aggregated")]
    else:
        groups = [_group(est.prefill, "prefill"), _group(est.decode, "decode")]
    fullest = max(groups, key=lambda g: g.memory_gib.weights + g.memory_gib.activations_workspace)
    mem = fullest.memory_gib
    shortfall = max(max(p.shortfall for p in (est.decode, est.prefill) if p is not None) / GIB, 0.0)
    weights_short = max(p.memory.shortfall for p in (est.decode, est.prefill) if p is not None) > 0
    notes = list(ASSUMPTIONS) + [f"engine defaults: {ctx.engine.source}"]
    if asked is not None and asked > est.concurrency and est.fits:
        notes.insert(0, f"concurrency {asked} exceeds the {est.max_concurrency} sequences the KV caches hold: "
                        f"{est.concurrency} run, the rest wait in the queue (their TTFT grows)")
    if not est.fits:
        notes.insert(0, f"does not fit: weights, workspace and runtime need {shortfall:.2f} GiB more per GPU than "
                        f"the {mem.capacity:.1f} GiB of a {ctx.cluster.gpu.name}" if weights_short else
                        f"does not fit: the KV cache cannot hold one sequence of {ctx.isl + ctx.osl} tokens "
                        f"({shortfall:.2f} GiB more per GPU)")
    return ServeEstimate(
        model=ctx.spec.name, cluster=ctx.cluster.name, isl=ctx.isl, osl=ctx.osl, precision=ctx.precision,
        kv_dtype=ctx.kv_dtype, engine=ctx.engine_name,
        output_tokens_per_s=round(est.output_tokens_per_s if est.fits else 0.0, 3),
        output_tokens_per_s_per_gpu=round(est.per_gpu if est.fits else 0.0, 3),
        tokens_per_s_per_user=round(est.tokens_per_s_per_user, 3), ttft_ms=round(est.ttft_s * 1e3, 3),
        tpot_ms=round(est.tpot_s * 1e3, 3), concurrency=est.concurrency if est.fits else 0,
        kv_cache_gib=groups[-1].memory_gib.kv_cache, max_concurrency=est.max_concurrency,
        memory_breakdown_gib={"weights": mem.weights, "kv_cache": mem.kv_cache,
                              "activations_workspace": mem.activations_workspace, "runtime": mem.runtime},
        fits=est.fits, shortfall_gib=round(shortfall, 3), bottleneck=est.bottleneck,  # type: ignore[arg-type]
        deployment=Deployment(mode="aggregated" if est.prefill is None else "disaggregated", gpus=est.gpus, groups=groups),
        assumptions=notes)


def _disaggregated_args(kw: dict[str, Any]) -> bool:
    return any(kw.get(k) is not None for k in ("prefill_workers", "decode_workers", "prefill_tp", "decode_tp"))


def serve_estimate(*, model: Any, cluster: Any, gpus: int, isl: int, osl: int, tp: int | None = None, pp: int = 1,
                   ep: int = 1, attention_dp: bool = False, concurrency: int | None = None, precision: str = "bf16",
                   kv_dtype: str | None = None, engine: str = "vllm", prefill_workers: int | None = None,
                   prefill_tp: int | None = None, prefill_pp: int = 1, prefill_ep: int = 1,
                   prefill_attention_dp: bool = False, decode_workers: int | None = None, decode_tp: int | None = None,
                   decode_pp: int = 1, decode_ep: int = 1, decode_attention_dp: bool = False) -> ServeEstimate:
    """Predict one deployment: ``gpus / (tp x pp)`` aggregated replicas, or (with the ``prefill_*`` /
    ``decode_*`` keywords instead of ``tp``) disaggregated prefill and decode workers. Without
    ``concurrency`` each worker runs the largest batch its KV cache and the engine allow (maximum
    throughput). Raises InputError for bad input; a deployment whose weights do not fit is still an
    estimate (``fits: false``, ``shortfall_gib`` says by how much)."""
    kw = dict(prefill_workers=prefill_workers, decode_workers=decode_workers, prefill_tp=prefill_tp, decode_tp=decode_tp)
    ctx = context(model=model, cluster=cluster, gpus=gpus, isl=isl, osl=osl, precision=precision,
                  kv_dtype=kv_dtype, engine=engine)
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency <= 0):
        raise InputError(f"concurrency must be a positive integer, got {concurrency!r}")
    if _disaggregated_args(kw):
        return _disaggregated(ctx, gpus, concurrency, prefill_workers, prefill_tp, prefill_pp, prefill_ep,
                              prefill_attention_dp, decode_workers, decode_tp, decode_pp, decode_ep, decode_attention_dp, tp)
    inst = make_instance(ctx.shape, tp or 1, pp, ep, attention_dp)
    if gpus % inst.gpus:
        raise InputError(f"tp {inst.tp} x pp {inst.pp} = {inst.gpus} GPUs per replica does not divide {gpus} GPUs")
    est = aggregated(ctx.hardware, ctx.shape, inst, gpus // inst.gpus, workload(ctx), ctx.engine, concurrency)
    return to_result(ctx, est, concurrency)


def _disaggregated(ctx: Context, gpus: int, concurrency: int | None, pw: int | None, ptp: int | None, ppp: int,
                   pep: int, pdp: bool, dw: int | None, dtp: int | None, dpp: int, dep: int, ddp: bool,
                   tp: int | None) -> ServeEstimate:
    problems = []
    if tp is not None:
        problems.append("--tp describes an aggregated deployment; give --prefill-tp and --decode-tp instead")
    for name, value in (("prefill-workers", pw), ("decode-workers", dw), ("prefill-tp", ptp), ("decode-tp", dtp)):
        if value is None:
            problems.append(f"a disaggregated deployment needs --{name}")
        elif isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            problems.append(f"{name} must be a positive integer, got {value!r}")
    if problems:
        raise InputError(*problems)
    pre = make_instance(ctx.shape, ptp, ppp, pep, pdp, "prefill")  # type: ignore[arg-type]
    dec = make_instance(ctx.shape, dtp, dpp, dep, ddp, "decode")  # type: ignore[arg-type]
    used = pw * pre.gpus + dw * dec.gpus  # type: ignore[operator]
    if used > gpus:
        raise InputError(f"{pw} prefill workers x {pre.gpus} GPUs + {dw} decode workers x {dec.gpus} GPUs = "
                         f"{used} GPUs, more than the {gpus} given")
    est = disaggregated(ctx.hardware, ctx.shape, pre, pw, dec, dw, workload(ctx), ctx.engine, concurrency)  # type: ignore[arg-type]
    return to_result(ctx, est, concurrency)
