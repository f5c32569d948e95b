"""Published training runs as cost-model inputs, and their measured figures as step times.

Reads ``published_runs.csv`` (see ``shared/reference/README.md``): each row becomes a model, a cluster
and a parallel configuration, and its measured throughput becomes a step time through the source's
own FLOP formula. Where a row leaves a setting unstated, the assumption is made here, once, in
:data:`ASSUMPTIONS` and the ``_<source>`` functions, and reported with the row.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from costmodel.specs import (
    ClusterSpec,
    EmbeddingLayer,
    HeadLayer,
    ModelSpec,
    NormLayer,
    ParallelConfig,
    TransformerLayer,
)
from profiles import load_cluster

ASSUMPTIONS: dict[str, str] = {
    "narayanan": (
        "micro-batch where not printed: 1 with pipelining, else the per-replica batch up to 4; interleaved 1F1B with 2 virtual stages when layers/pp is "
        "even (the paper uses interleaving but prints no v); eager attention (2021, no FlashAttention); "
        "fp32 gradient all-reduce without overlap, no distributed optimizer (2021 Megatron); Table 2 "
        "rows recompute fully (eq. 3 counts it); GPT-3 PTD-P rows split model parallelism 96 as tp 8 x "
        "pp 12 (Table 2 prints only the product); ZeRO-3 rows use DeepSpeed's default "
        "prefetch bucket (5e7 parameters per all-gather), fetched on demand without overlap "
        "(latency-bound rings over hundreds of ranks leave nothing to hide behind)"
    ),
    "megatron": (
        "micro-batch 1 with pipelining, else the per-replica batch up to 4; SP on when tp > 1 (--tp-comm-overlap requires it); distributed optimizer with "
        "overlapped grad reduce and param gather (README flags); FlashAttention (Transformer Engine); "
        "no recompute; 1F1B, interleaved with 2 virtual stages when layers/pp is even"
    ),
    "mosaicml": (
        "FULL_SHARD = ZeRO-3, SHARD_GRAD_OP = ZeRO-2; FlashAttention; bf16 all-gathers, gradient "
        "reduction in fp32 for mixed precision DEFAULT and bf16 for PURE; H100 nodes are DGX-class "
        "(8 x 400 Gb/s)"
    ),
    "shoeybi": (
        "micro-batch = the 8 sequences per replica; eager attention; full recompute; fp16 gradient "
        "all-reduce without overlap"
    ),
}

DEEPSPEED_PREFETCH_BUCKET = 50_000_000
"""DeepSpeed ZeRO-3 ``stage3_prefetch_bucket_size`` default (docs, config-json: 5e7 parameters)."""

_CLUSTERS = {
    "A100-SXM4-80GB": "dgx-a100",
    "H100": "dgx-h100",
    "A100 80GB, 1600": "a100-roce",
    "A100 40GB, 1600": "a100-40gb-roce",
    "V100": "dgx-2h",
}


@dataclass(frozen=True)
class PublishedRun:
    """One comparable row: inputs for the cost model and the measured step time."""

    label: str
    source: str
    model: ModelSpec
    cluster: ClusterSpec
    config: ParallelConfig
    measured_step_s: float


def _int(row: dict[str, str], key: str, default: int | None = None) -> int | None:
    value = row.get(key, "").strip()
    return int(float(value)) if value else default


def source_key(row: dict[str, str]) -> str:
    """Short name of a row's source: narayanan, megatron, mosaicml or shoeybi."""
    src = row["source"]
    if src.startswith("Efficient Large-Scale"):
        return "narayanan"
    if src.startswith("NVIDIA/Megatron-LM"):
        return "megatron"
    if src.startswith("mosaicml"):
        return "mosaicml"
    return "shoeybi"


def gpt_model(row: dict[str, str], *, gpt_style: bool) -> ModelSpec:
    """A GPT-style decoder from a row's architecture columns (kv heads = heads and ffn = 4h when the
    row leaves them empty: README 'GPT-style models are MHA with ffn = 4h'). ``gpt_style`` selects
    Megatron GPT details (learned positions, biases, dropout); otherwise MPT's (ALiBi, no biases)."""
    h, heads = _int(row, "hidden"), _int(row, "heads")
    seq, vocab = _int(row, "seq_len"), _int(row, "vocab")
    block = TransformerLayer(
        hidden_size=h,
        num_heads=heads,
        num_kv_heads=_int(row, "kv_heads", heads),
        head_dim=h // heads,
        ffn_hidden_size=_int(row, "ffn_hidden", 4 * h),
        ffn_act="gelu",
        norm="layernorm",
        qkv_bias=gpt_style,
        out_bias=gpt_style,
        mlp_bias=gpt_style,
        dropout=gpt_style,
    )
    layers = (
        (EmbeddingLayer(vocab_size=vocab, hidden_size=h, max_positions=seq if gpt_style else 0),)
        + (block,) * _int(row, "layers")
        + (NormLayer(hidden_size=h), HeadLayer(vocab_size=vocab, hidden_size=h, tied=True))
    )
    return ModelSpec(name=row["model"], layers=layers, tied_embeddings=True, max_seq_len=seq, source="published_runs.csv")


def _micro_batch(row: dict[str, str], pp: int, dp: int) -> int:
    """Unstated micro-batch: 1 under pipelining (small micro-batches shrink the bubble; Narayanan et al.
    2021 eq. 1), else the whole per-replica batch up to 4 sequences (no pipeline to feed, and larger
    GEMMs and fewer gradient-accumulation steps run faster)."""
    if pp > 1:
        return 1
    per_replica = _int(row, "global_batch") // dp
    return max(b for b in range(1, min(per_replica, 4) + 1) if per_replica % b == 0)


def _vpp(layers: int, pp: int) -> int:
    return 2 if pp > 1 and (layers // pp) % 2 == 0 and layers % pp == 0 else 1


def _narayanan(row: dict[str, str]) -> ParallelConfig:
    layers, gbs, n = _int(row, "layers"), _int(row, "global_batch"), _int(row, "num_gpus")
    tp, pp = _int(row, "tp"), _int(row, "pp")
    if tp is None:  # Table 2 GPT-3 PTD-P: model-parallel size 96 printed, split assumed
        tp, pp = 8, 12
    zero3 = row["zero_or_fsdp"].startswith("ZeRO-3")
    vpp = 1 if zero3 else _vpp(layers, pp)
    return ParallelConfig(
        tp=tp, pp=pp, dp=n // (tp * pp), vpp=vpp, micro_batch=_int(row, "micro_batch", _micro_batch(row, pp, n // (tp * pp))),
        global_batch=gbs, seq_len=_int(row, "seq_len"), recompute="full", attention="eager",
        zero=3 if zero3 else 0, grad_bytes=2 if zero3 else 4, grad_reduce_bytes=2 if zero3 else 4,
        overlap_grad_reduce=zero3, schedule="interleaved-1f1b" if vpp > 1 else "1f1b",
        zero3_bucket_params=DEEPSPEED_PREFETCH_BUCKET if zero3 else 0, overlap_param_gather=not zero3,
    )


def _megatron(row: dict[str, str]) -> ParallelConfig:
    tp, pp, n, layers = _int(row, "tp"), _int(row, "pp"), _int(row, "num_gpus"), _int(row, "layers")
    vpp = _vpp(layers, pp)
    return ParallelConfig(
        tp=tp, pp=pp, dp=n // (tp * pp), vpp=vpp, sp=tp > 1, zero=1, micro_batch=_micro_batch(row, pp, n // (tp * pp)),
        global_batch=_int(row, "global_batch"), seq_len=_int(row, "seq_len"), recompute="none",
        tp_comm_overlap=tp > 1, schedule="interleaved-1f1b" if vpp > 1 else "1f1b",
    )


def _mosaicml(row: dict[str, str]) -> ParallelConfig:
    full = "FULL_SHARD" in row["zero_or_fsdp"]
    pure = "fsdp_mixed_precision=PURE" in row["measured_other"]
    return ParallelConfig(
        dp=_int(row, "num_gpus"), zero=3 if full else 2, micro_batch=_int(row, "micro_batch"),
        global_batch=_int(row, "global_batch"), seq_len=_int(row, "seq_len"),
        recompute="full" if row["recompute"].startswith("full") else "none",
        grad_reduce_bytes=2 if pure else 4, grad_bytes=2 if pure else 4,
    )


def _shoeybi(row: dict[str, str]) -> ParallelConfig:
    tp, n = _int(row, "tp"), _int(row, "num_gpus")
    dp = n // tp
    return ParallelConfig(
        tp=tp, dp=dp, micro_batch=_int(row, "global_batch") // dp, global_batch=_int(row, "global_batch"),
        seq_len=_int(row, "seq_len"), recompute="full", attention="eager", grad_bytes=2,
        grad_reduce_bytes=2, overlap_grad_reduce=False,
    )


def hardware_flops_96(row: dict[str, str]) -> float:
    """Narayanan et al. 2021 eq. 3 (full recompute): 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))."""
    b, s, l, h, v = (_int(row, k) for k in ("global_batch", "seq_len", "layers", "hidden", "vocab"))
    return 96.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def model_flops_72(row: dict[str, str]) -> float:
    """Megatron ``num_floating_point_operations`` for GPT (MHA, f = 4h, full s²):
    72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) (Korthikanti et al. 2022)."""
    b, s, l, h, v = (_int(row, k) for k in ("global_batch", "seq_len", "layers", "hidden", "vocab"))
    return 72.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))


def measured_step_time(row: dict[str, str]) -> float | None:
    """The published figure as seconds per step, with the source's own FLOP formula."""
    n = _int(row, "num_gpus")
    key = source_key(row)
    if key == "mosaicml":
        tps = float(row["measured_other"].split("tokens_per_sec_per_gpu=")[1].split(";")[0])
        return _int(row, "global_batch") * _int(row, "seq_len") / (n * tps)
    if not row["measured_tflops_per_gpu"]:
        return None
    flops = model_flops_72(row) if key == "megatron" else hardware_flops_96(row)
    return flops / (n * float(row["measured_tflops_per_gpu"]) * 1e12)


def cluster_for_row(row: dict[str, str]) -> ClusterSpec:
    """The cluster preset that matches a row's GPU description."""
    for prefix, name in _CLUSTERS.items():
        if row["gpu"].startswith(prefix):
            return load_cluster(name)
    raise ValueError(f"no cluster preset for GPU {row['gpu']!r}")


def load_runs(csv_path: str | Path) -> tuple[list[PublishedRun], list[tuple[str, str]]]:
    """(comparable runs, skipped rows with the reason) of a published_runs.csv file."""
    builders = {"narayanan": _narayanan, "megatron": _megatron, "mosaicml": _mosaicml, "shoeybi": _shoeybi}
    runs, skipped = [], []
    with open(csv_path, newline="") as handle:
        for i, row in enumerate(csv.DictReader(handle)):
            label = f"{i + 2:>2} {row['model']} @{row['num_gpus']}"
            step = measured_step_time(row)
            if step is None or not row["tp"] and source_key(row) == "megatron":
                skipped.append((label, "parallel configuration or throughput not published"))
                continue
            key = source_key(row)
            model = gpt_model(row, gpt_style=key != "mosaicml")
            runs.append(PublishedRun(label, key, model, cluster_for_row(row), builders[key](row), step))
    return runs, skipped
