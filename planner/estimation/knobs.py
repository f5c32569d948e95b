"""Engine knobs of ``meshplan estimate`` / ``planner.estimate``: the target engine, the GEMM precision
and the implementation switches the cost model has (``costmodel.engines``), turned into
``ParallelConfig`` fields with each engine's defaults stated as assumptions.

Defaults follow what each engine does when the flag is not given: Megatron-LM reduces gradients in
fp32 (``--grad-reduce-in-bf16`` is opt-in) and overlaps them only with ``--overlap-grad-reduce``
(meshplan assumes the overlap flags are on, as NVIDIA's published recipes set them); torchtitan runs
eager unless ``compile`` is on, shards with FSDP2 and reduces in fp32 (``mixed_precision_reduce``);
DeepSpeed reduces gradients after the pipeline flush. Every problem is returned, not raised, so
the caller reports them all at once.
"""

from __future__ import annotations

from typing import Any

from costmodel.specs import ClusterSpec

TARGETS = ("native", "megatron", "torchtitan", "deepspeed")
PRECISIONS = ("bf16", "fp8")
REDUCE_DTYPES = {"bf16": 2, "fp32": 4}


def _flag(value: Any, name: str, problems: list[str]) -> bool | None:
    if value is not None and not isinstance(value, bool):
        problems.append(f"{name} must be True, False or None (got {value!r:.40})")
        return None
    return value


def knob_settings(cluster: ClusterSpec, settings: dict[str, Any], knobs: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """(ParallelConfig fields, assumptions, problems) for the engine knobs ``knobs`` (keys: target,
    precision, tp_overlap, tp_async, grad_reduce_dtype, dp_overlap, compile, loss_fusion, grad_accum_fusion,
    offload_optimizer, offload_activations, zero3_bucket; None = the engine's default) given the parallel ``settings`` (tp, sp, zero)."""
    problems: list[str] = []
    assumptions: list[str] = []
    target = knobs.get("target") or "native"
    if target not in TARGETS:
        problems.append(f"target must be one of {', '.join(TARGETS)} (got {target!r:.40})")
        target = "native"
    precision = knobs.get("precision") or "bf16"
    if precision not in PRECISIONS:
        problems.append(f"precision must be bf16 or fp8 (got {precision!r:.40})")
        precision = "bf16"
    if precision == "fp8" and cluster.gpu.peak_fp8_tflops is None:
        problems.append(f"precision fp8: GPU {cluster.gpu.name} has no FP8 tensor cores (use --precision bf16)")
    out: dict[str, Any] = {"engine": target, "precision": precision}
    if precision == "fp8":
        recipe = "MXFP8 block scaling" if cluster.gpu.mxfp8 else (
            "torchao tensorwise dynamic scaling" if target == "torchtitan" else "Transformer Engine delayed scaling")
        assumptions.append(f"fp8: {recipe} on the blocks' projections; attention core, router, embedding and output layer in bf16")
        assumptions.append("fp8: MFU stays against the dense BF16 peak (as NeMo's model TFLOP/s), so FP8 runs can exceed what BF16 reaches")
    out.update(_overlaps(settings, knobs, target, problems, assumptions))
    out.update(_reduce_dtype(knobs, target, problems, assumptions))
    out.update(_fusions(knobs, target, problems, assumptions))
    out.update(_offload(cluster, knobs, problems))
    out.update(_zero3_bucket(settings, knobs, target, problems))
    if target == "torchtitan" and settings.get("zero") is None:
        out["zero"] = 3
        assumptions.append("zero 3: torchtitan shards with FSDP2 (default)")
    return out, assumptions, problems


def _overlaps(settings: dict[str, Any], knobs: dict[str, Any], target: str, problems: list[str], assumptions: list[str]) -> dict[str, Any]:
    """TP communication overlap (Megatron ``--tp-comm-overlap``, needs SP; torchtitan async TP,
    needs compile) and DP overlap (gradient reduce and parameter gather behind compute)."""
    out: dict[str, Any] = {}
    tp_overlap = _flag(knobs.get("tp_overlap"), "tp_overlap", problems)
    if tp_overlap:
        tp, sp = settings.get("tp", 1), settings.get("sp")
        if tp == 1:
            problems.append("tp-overlap needs tp > 1 (there is no TP communication to overlap)")
        if sp is False:
            problems.append("tp-overlap needs sequence parallelism (Megatron --tp-comm-overlap requires --sequence-parallel; drop --no-sp)")
        if target == "deepspeed":
            problems.append("tp-overlap: DeepSpeed has no TP communication overlap (use --target megatron or torchtitan)")
        if target == "torchtitan" and knobs.get("compile") is False:
            problems.append("tp-overlap: torchtitan's async TP needs compile (drop --no-compile)")
        out["tp_comm_overlap"] = True
    tp_async = _flag(knobs.get("tp_async"), "tp_async", problems)
    if tp_async is not None:
        out["tp_async_backward"] = tp_async
    elif target in ("megatron", "native") and settings.get("tp", 1) > 1:
        assumptions.append("tp backward: the column-parallel linears' gradient collectives run behind their GEMMs (Megatron's async TP; --no-tp-async for code before it)")
    dp_overlap = _flag(knobs.get("dp_overlap"), "dp_overlap", problems)
    if dp_overlap is not None and target == "deepspeed":
        out.update(_deepspeed_overlap(settings.get("zero"), dp_overlap, problems))
    elif dp_overlap is not None:
        out["overlap_grad_reduce"] = out["overlap_param_gather"] = dp_overlap
    elif target == "deepspeed":
        if settings.get("zero") in (0, 1, 2, None):
            out["overlap_grad_reduce"] = out["overlap_param_gather"] = False
            assumptions.append("deepspeed: zero_optimization.overlap_comm is false for stages 0-2 by default (no DP overlap; --dp-overlap sets it)")
        assumptions.append("deepspeed: gradients reduced after the pipeline flush (no overlap with backward under pp > 1)")
    return out


def _deepspeed_overlap(zero: int | None, overlap: bool, problems: list[str]) -> dict[str, Any]:
    """DeepSpeed's ``zero_optimization.overlap_comm``: the gradient reduction behind the backward
    (ZeRO 1-3; without ZeRO the engine all-reduces after the backward), and the parameter gather
    behind the forward only under ZeRO-3's prefetch: stages 1-2 gather inside the optimizer step
    (``search.targets.engine_fields``)."""
    stage = 1 if zero is None else zero
    if overlap and stage == 0:
        problems.append("dp-overlap: DeepSpeed without ZeRO all-reduces gradients after the backward (overlap_comm needs zero 1-3)")
    return {"overlap_grad_reduce": overlap, "overlap_param_gather": overlap and stage == 3}


def _reduce_dtype(knobs: dict[str, Any], target: str, problems: list[str], assumptions: list[str]) -> dict[str, Any]:
    """Gradient reduction dtype; Megatron's ``--grad-reduce-in-bf16`` also keeps the main grads in bf16."""
    dtype = knobs.get("grad_reduce_dtype")
    if dtype is None:
        return {}
    if dtype not in REDUCE_DTYPES:
        problems.append(f"grad-reduce-dtype must be bf16 or fp32 (got {dtype!r:.40})")
        return {}
    out = {"grad_reduce_bytes": REDUCE_DTYPES[dtype]}
    if target in ("megatron", "native"):
        out["grad_bytes"] = REDUCE_DTYPES[dtype]
        assumptions.append(f"gradients kept and reduced in {dtype} (Megatron main grads follow --grad-reduce-in-bf16)")
    return out


def _fusions(knobs: dict[str, Any], target: str, problems: list[str], assumptions: list[str]) -> dict[str, Any]:
    """torch.compile / fused kernels, the fused cross-entropy and the fused gradient accumulation."""
    out: dict[str, Any] = {}
    compiled = _flag(knobs.get("compile"), "compile", problems)
    if compiled is not None:
        out["compile"] = compiled
    elif target == "torchtitan":
        assumptions.append("torchtitan eager (no torch.compile; --compile fuses each block)")
    fusion = _flag(knobs.get("loss_fusion"), "loss_fusion", problems)
    if fusion:
        if target not in ("megatron", "native"):
            problems.append(f"loss-fusion: only Megatron-LM has the fused cross-entropy (target {target})")
        out["loss_fusion"] = True
    accumulate = _flag(knobs.get("grad_accum_fusion"), "grad_accum_fusion", problems)
    if accumulate is not None:
        if accumulate and target not in ("megatron", "native"):
            problems.append(f"grad-accum-fusion: only Megatron-LM fuses gradient accumulation into its GEMMs (target {target})")
        out["grad_accum_fusion"] = accumulate
    return out


def _offload(cluster: ClusterSpec, knobs: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """Offloading to host memory needs the cluster's host link."""
    out: dict[str, Any] = {}
    for key in ("offload_optimizer", "offload_activations"):
        value = _flag(knobs.get(key), key, problems)
        if value:
            if cluster.host_link_bandwidth_gbps is None:
                problems.append(f"{key.replace('_', '-')}: cluster {cluster.name} states no host_link_bandwidth_gbps (add it to the cluster file)")
            out[key] = True
    return out


def _zero3_bucket(settings: dict[str, Any], knobs: dict[str, Any], target: str, problems: list[str]) -> dict[str, Any]:
    """Parameters per ZeRO-3 collective (DeepSpeed ``stage3_prefetch_bucket_size``); unset, one
    collective per layer (an FSDP unit)."""
    value = knobs.get("zero3_bucket")
    if value is None:
        return {}
    if type(value) is not int or value < 1:
        problems.append(f"zero3_bucket must be a positive number of parameters (got {value!r:.40})")
        return {}
    zero = settings.get("zero")
    zero = zero if zero is not None else 3 if target == "torchtitan" else 1
    if zero != 3:
        problems.append(f"zero3-bucket: parameters are gathered in buckets only under ZeRO-3 (zero is {zero}; add --zero 3)")
    return {"zero3_bucket_params": value}
