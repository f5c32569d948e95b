"""Published training runs as cost-model inputs, and their measured figures as step times.

Reads ``published_runs.csv`` (kept in the repository beside this module, ``planner/reference/``,
with its README naming every source): each row becomes a model, a cluster
and a parallel configuration, and its measured throughput becomes a step time through the source's
own FLOP formula. Where a row leaves a setting unstated, the assumption is made here, once, in
:data:`ASSUMPTIONS` and the ``_<source>`` functions, and reported with the row.
"""

from __future__ import annotations

import csv
import io
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
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from profiles import load_cluster

ASSUMPTIONS: dict[str, str] = {
    "narayanan": (
        "engine megatron (ZeRO-3 rows: engine deepspeed). "
        "Table 1 and Table 2 PTD-P rows run the authors' reproduction scripts (NVIDIA/Megatron-LM "
        "examples/sc21, SC21_RUNS): their micro-batch, virtual stages and DDP (torch DDP = gradient "
        "all-reduce overlapped with backward for pp = 1, local DDP = not overlapped for pp > 1); fp16 "
        "(--fp16) so fp16 gradients are all-reduced; full recompute (--recompute-method uniform; eq. 3 "
        "counts it); eager attention with dropout (2021, no FlashAttention); synchronous TP collectives "
        "and every micro-batch's gradients added in a pass of their own (the code predates Megatron's "
        "LinearWithGradAccumulationAndAsyncCommunication of late 2021, apex PR #1183, which brought both the "
        "async TP all-reduce and the gradient-accumulation fusion); GPT-3 PTD-P rows split "
        "model parallelism 96 as tp 8 x pp 12 with 2 layers per virtual stage (run_figure_12.sh: the "
        "same model and split). ZeRO-3 rows (DeepSpeed of 2021, fp16): parameters fetched on demand "
        "without overlap (overlap_comm off by default), their collectives counted as one ring per default "
        "prefetch bucket (5e7 parameters), a stand-in calibrated on these rows: DeepSpeed 0.3 gathers and "
        "reduce-scatters per parameter with host work that grows with the ranks (stage3.py "
        "fetch_sub_module, partition_parameters.py _allgather_param), which the buckets' ring latency "
        "approximates"
    ),
    "megatron": (
        "engine megatron (Megatron-Core). "
        "SP on when tp > 1 (--tp-comm-overlap requires it); distributed optimizer with overlapped "
        "gradient reduce-scatter (fp32, Megatron's default for bf16) and param all-gather (README flags); "
        "FlashAttention (Transformer Engine); no recompute; pp = 1 rows take the largest micro-batch "
        "that fits (no pipeline bubble to trade against; what examples/sc21 does), pp > 1 rows "
        "micro-batch 1; interleaved 1F1B with the fewest virtual stages that interleave at all (the "
        "smallest divisor above 1 of the layers per stage; the README prints no v)"
    ),
    "mosaicml": (
        "engine native (PyTorch FSDP under Composer, none of the three targets). "
        "FULL_SHARD = ZeRO-3, SHARD_GRAD_OP = ZeRO-2; FlashAttention; bf16 all-gathers, gradient "
        "reduction in fp32 for mixed precision DEFAULT and bf16 for PURE; H100 nodes are DGX-class "
        "(8 x 400 Gb/s)"
    ),
    "shoeybi": (
        "engine megatron, unfused (compile off). "
        "micro-batch = the 8 sequences per replica; eager attention; full recompute; synchronous TP "
        "collectives; fp16 gradient "
        "all-reduce without overlap; Megatron-LM of 2019 without its later fused kernels (scale, mask and "
        "softmax as separate passes: its v1.0 release reports 39 -> 62 TFLOP/s from such fusions)"
    ),
    "torchtitan": (
        "seq 8192 (llama3_8b.toml default at the benchmark commit); FSDP2 over every GPU (ZeRO-3 with "
        "fp32 sharded parameters, bf16 all-gathers, fp32 reduce-scatters every micro-batch); local batch "
        "2 as one micro-batch; op-level selective checkpointing; SDPA's FlashAttention-2 backend; torchtitan's eager "
        "loss on fp32 logits; eager or torch.compile per block as the row says; Float8 = torchao "
        "dynamic tensorwise scaling on the block projections (output layer bf16); H100 96GB HBM2e at "
        "500 W (cluster grand-teton-h100); peak memory is the allocator's reserved peak"
    ),
    "nemo": (
        "NeMo 24.07 = Megatron-Core with Transformer Engine FP8 (delayed scaling) on the block "
        "projections; SP with TP, TP communication overlap, distributed optimizer with overlapped "
        "reduce-scatter / all-gather (bf16 gradient reduction, NeMo's default), fused cross-entropy; no "
        "recompute; micro-batch 1 and the vpp / cp the row prints; FlashAttention (cuDNN); throughput from "
        "the printed tokens/s; GPT-3 vocabulary 51200 (not printed)"
    ),
}
"""One statement per source of every setting its rows leave unstated, applied to all its rows."""

PUBLISHED_RUNS_CSV = Path(__file__).resolve().parent / "published_runs.csv"
"""The published runs the cost model is calibrated and checked on (a copy kept inside the repository)."""

TORCHTITAN_SEQ_LEN = 8192
"""torchtitan's rows print no sequence length: llama3_8b.toml at the benchmark commit sets 8192."""
GPT3_VOCAB = 51200
"""NeMo's GPT3-175B row prints no vocabulary: GPT-3's 50257 tokens padded to 51200 (Narayanan et al.)."""
DEEPSPEED_PREFETCH_BUCKET = 50_000_000
"""DeepSpeed ZeRO-3 ``stage3_prefetch_bucket_size`` default (docs, config-json: 5e7 parameters). The
ZeRO-3 rows count one collective per bucket: a stand-in for DeepSpeed 0.3's per-parameter gathers and
reduce-scatters, each with host work linear in the ranks (``torch.cuda.synchronize``, one view and
copy per rank: deepspeed/runtime/zero/partition_parameters.py ``_allgather_param``, stage3.py), which
the per-bucket ring latency approximates; no sourced per-operation cost fits all six rows without
being chosen on them."""

_CLUSTERS = {
    "H100 96GB HBM2e": "grand-teton-h100",
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
    measured_peak_memory_gib: float | None = None
    """The allocator's peak per GPU where the source prints it (torchtitan: max reserved)."""


def _int(row: dict[str, str], key: str, default: int | None = None) -> int | None:
    value = row.get(key, "").strip()
    return int(float(value)) if value else default


def source_key(row: dict[str, str]) -> str:
    """Short name of a row's source: narayanan, megatron, mosaicml, shoeybi, torchtitan or nemo."""
    src = row["source"]
    if src.startswith("pytorch/torchtitan"):
        return "torchtitan"
    if src.startswith("NVIDIA/NeMo"):
        return "nemo"
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


def llama_model(row: dict[str, str]) -> ModelSpec:
    """A Llama-style decoder (RMSNorm, SwiGLU, rotary, no biases, GQA, untied head) from a row's
    architecture columns (torchtitan's and NeMo's Llama rows)."""
    h, heads = _int(row, "hidden"), _int(row, "heads")
    vocab = _int(row, "vocab")
    block = TransformerLayer(
        hidden_size=h, num_heads=heads, num_kv_heads=_int(row, "kv_heads", heads), head_dim=h // heads,
        ffn_hidden_size=_int(row, "ffn_hidden"), ffn_act="swiglu", norm="rmsnorm",
    )
    layers = (
        (EmbeddingLayer(vocab_size=vocab, hidden_size=h),)
        + (block,) * _int(row, "layers")
        + (NormLayer(hidden_size=h, norm="rmsnorm"), HeadLayer(vocab_size=vocab, hidden_size=h))
    )
    return ModelSpec(name=row["model"], layers=layers, max_seq_len=_int(row, "seq_len") or TORCHTITAN_SEQ_LEN, source="published_runs.csv")


def _vpp(layers: int, pp: int) -> int:
    """Virtual stages where a source interleaves but prints no v: the fewest that interleave at all,
    the smallest divisor above 1 of the layers per stage (1 when a stage holds one layer)."""
    per_stage = layers // pp if pp > 1 and layers % pp == 0 else 1
    return next((v for v in range(2, per_stage + 1) if per_stage % v == 0), 1)


SC21_RUNS: dict[tuple[int, int], tuple[int, int, bool]] = {
    (24, 2304): (16, 1, True),
    (30, 3072): (16, 1, True),
    (36, 4096): (16, 1, True),
    (40, 6144): (8, 1, True),
    (48, 8192): (4, 1, False),
    (60, 10240): (2, 3, False),
    (80, 12288): (2, 2, False),
    (96, 16384): (1, 2, False),
    (105, 20480): (1, 3, False),
    (128, 25600): (1, 1, False),
    (96, 12288): (1, 4, False),
}
"""(micro-batch, virtual stages, torch DDP) of Narayanan et al.'s runs by (layers, hidden), from the
authors' reproduction scripts: NVIDIA/Megatron-LM ``examples/sc21/run_table_1.sh`` (Table 1: MBS,
``--num-layers-per-virtual-pipeline-stage`` -> v = layers / (pp x that), ``--DDP-impl torch`` for the
pp = 1 rows, ``local`` otherwise; the 530B entry also serves Table 2's PTD-P rows) and
``run_figure_12.sh`` (GPT-3 175B at tp 8 x pp 12, interleaved with 2 layers per virtual stage)."""


def _narayanan(row: dict[str, str]) -> ParallelConfig:
    layers, hidden, gbs, n = (_int(row, k) for k in ("layers", "hidden", "global_batch", "num_gpus"))
    tp, pp = _int(row, "tp"), _int(row, "pp")
    if tp is None:  # Table 2 GPT-3 PTD-P: model-parallel size 96 printed; run_figure_12.sh's split
        tp, pp = 8, 12
    if row["zero_or_fsdp"].startswith("ZeRO-3"):
        return _deepspeed_zero3(row, n, gbs)
    mbs, vpp, torch_ddp = SC21_RUNS[(layers, hidden)]
    return ParallelConfig(
        tp=tp, pp=pp, dp=n // (tp * pp), vpp=vpp, micro_batch=_int(row, "micro_batch", mbs),
        global_batch=gbs, seq_len=_int(row, "seq_len"), recompute="full", attention="eager",
        grad_bytes=2, grad_reduce_bytes=2, overlap_grad_reduce=torch_ddp, overlap_param_gather=False,
        schedule="interleaved-1f1b" if vpp > 1 else "1f1b", engine="megatron", tp_async_backward=False,
        grad_accum_fusion=False,
    )


def _deepspeed_zero3(row: dict[str, str], n: int, gbs: int) -> ParallelConfig:
    """Narayanan et al. Table 2's DeepSpeed ZeRO-3 rows (no model parallelism, fp16)."""
    return ParallelConfig(
        dp=n, micro_batch=_int(row, "micro_batch"), global_batch=gbs, seq_len=_int(row, "seq_len"),
        recompute="full", attention="eager", zero=3, grad_bytes=2, grad_reduce_bytes=2,
        zero3_bucket_params=DEEPSPEED_PREFETCH_BUCKET, overlap_param_gather=False, engine="deepspeed",
    )


def _megatron(row: dict[str, str]) -> ParallelConfig:
    tp, pp, n, layers = _int(row, "tp"), _int(row, "pp"), _int(row, "num_gpus"), _int(row, "layers")
    vpp = _vpp(layers, pp)
    return ParallelConfig(
        tp=tp, pp=pp, dp=n // (tp * pp), vpp=vpp, sp=tp > 1, zero=1, micro_batch=1,
        global_batch=_int(row, "global_batch"), seq_len=_int(row, "seq_len"), recompute="none",
        tp_comm_overlap=tp > 1, schedule="interleaved-1f1b" if vpp > 1 else "1f1b", engine="megatron",
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


def _torchtitan(row: dict[str, str]) -> ParallelConfig:
    """torchtitan's Llama 3.1 8B FSDP2 rows (:data:`ASSUMPTIONS` ``torchtitan``)."""
    n, gbs = _int(row, "num_gpus"), _int(row, "global_batch")
    name = row["model"]
    return ParallelConfig(
        dp=n, zero=3, micro_batch=gbs // n, global_batch=gbs, seq_len=_int(row, "seq_len", TORCHTITAN_SEQ_LEN),
        recompute="selective", engine="torchtitan", compile="compile" in name,
        precision="fp8" if "Float8" in name else "bf16", grad_bytes=4, grad_reduce_bytes=4,
    )


def _nemo(row: dict[str, str]) -> ParallelConfig:
    """NeMo 24.07's FP8 pre-training rows (:data:`ASSUMPTIONS` ``nemo``)."""
    tp, pp, cp, n = (_int(row, k, 1) for k in ("tp", "pp", "cp", "num_gpus"))
    vpp = _int(row, "vpp", 1)
    return ParallelConfig(
        tp=tp, pp=pp, cp=cp, dp=n // (tp * pp * cp), vpp=vpp, sp=tp > 1, zero=1, micro_batch=_int(row, "micro_batch", 1),
        global_batch=_int(row, "global_batch"), seq_len=_int(row, "seq_len"), recompute="none",
        tp_comm_overlap=tp > 1, schedule="interleaved-1f1b" if vpp > 1 else "1f1b", engine="megatron",
        precision="fp8", grad_bytes=2, grad_reduce_bytes=2, loss_fusion=True,
    )


def _shoeybi(row: dict[str, str]) -> ParallelConfig:
    tp, n = _int(row, "tp"), _int(row, "num_gpus")
    dp = n // tp
    return ParallelConfig(
        tp=tp, dp=dp, micro_batch=_int(row, "global_batch") // dp, global_batch=_int(row, "global_batch"),
        seq_len=_int(row, "seq_len"), recompute="full", attention="eager", grad_bytes=2,
        grad_reduce_bytes=2, overlap_grad_reduce=False, engine="megatron", compile=False, tp_async_backward=False,
        grad_accum_fusion=False,
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


def _other(row: dict[str, str], key: str) -> str | None:
    """A ``key=value`` entry of a row's ``measured_other`` column."""
    for part in row["measured_other"].split(";"):
        name, _, value = part.strip().partition("=")
        if name == key:
            return value
    return None


def measured_peak_memory_gib(row: dict[str, str]) -> float | None:
    """The allocator's peak memory per GPU where a row publishes it (torchtitan), GiB."""
    value = _other(row, "peak_mem_GiB")
    return float(value) if value else None


def measured_step_time(row: dict[str, str]) -> float | None:
    """The published figure as seconds per step, with the source's own FLOP formula."""
    n = _int(row, "num_gpus")
    key = source_key(row)
    if key in ("mosaicml", "torchtitan", "nemo"):
        tps = float(_other(row, "tokens_per_sec_per_gpu"))
        seq = _int(row, "seq_len", TORCHTITAN_SEQ_LEN)
        return _int(row, "global_batch") * seq / (n * tps)
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


def largest_fitting_micro_batch(model: ModelSpec, cluster: ClusterSpec, config: ParallelConfig) -> ParallelConfig:
    """Without pipelining, Narayanan et al.'s micro-batch trade-off (eq. 1, (b'/b + p − 1)·t(b)) has
    p = 1: the step only gets faster as b grows, so a throughput run takes the largest micro-batch
    that fits. NVIDIA's own pp = 1 benchmark runs do so (examples/sc21/run_table_1.sh: 16 sequences,
    the whole per-replica batch; 8 for the 18B model, limited by memory). Tries powers of two that
    divide the per-replica batch, largest first, and keeps the first that fits (else 1)."""
    per_replica = config.global_batch // config.dp
    sizes = [b for b in (2 ** k for k in range(12)) if b <= per_replica and per_replica % b == 0]
    table = build_cost_table(model, cluster)
    for size in sorted(sizes, reverse=True):
        trial = config.model_copy(update={"micro_batch": size})
        if estimate_step(table, trial).fits:
            return trial
    return config


def _row_model(row: dict[str, str], key: str) -> ModelSpec:
    """The row's model: Llama-style when it has KV heads below its heads or a Llama name, else GPT
    (Megatron style, or MPT's for MosaicML)."""
    if "llama" in row["model"].lower():
        return llama_model(row)
    if not row["vocab"]:
        row = {**row, "vocab": str(GPT3_VOCAB)}
    return gpt_model(row, gpt_style=key != "mosaicml")


def load_runs(csv_path: str | Path) -> tuple[list[PublishedRun], list[tuple[str, str]]]:
    """(comparable runs, skipped rows with the reason) of a published_runs.csv file."""
    builders = {
        "narayanan": _narayanan, "megatron": _megatron, "mosaicml": _mosaicml, "shoeybi": _shoeybi,
        "torchtitan": _torchtitan, "nemo": _nemo,
    }
    from planner.intake.jsonio import read_text

    runs, skipped = [], []
    text = read_text(csv_path, f"published runs CSV {csv_path}", "give a CSV in the columns of published_runs.csv")
    for i, row in enumerate(csv.DictReader(io.StringIO(text, newline=""))):
        label = f"{i + 2:>2} {row['model']} @{row['num_gpus']}"
        if source_key(row) not in builders:
            skipped.append((label, f"{source_key(row)} runs are not modelled yet"))
            continue
        step = measured_step_time(row)
        if step is None or not row["tp"] and source_key(row) == "megatron":
            skipped.append((label, "parallel configuration or throughput not published"))
            continue
        key = source_key(row)
        model = _row_model(row, key)
        cluster, config = cluster_for_row(row), builders[key](row)
        if key == "megatron" and config.pp == 1:
            config = largest_fitting_micro_batch(model, cluster, config)
        runs.append(PublishedRun(label, key, model, cluster, config, step, measured_peak_memory_gib(row)))
    return runs, skipped
