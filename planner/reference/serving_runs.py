"""Reader of ``serving_runs.csv``: published serving runs as ``serve-estimate`` arguments.

A row becomes a :class:`ServingRun` when ``serve-estimate`` can state it: a model and GPU meshplan
has presets for, fixed input and output lengths, and an aggregated deployment. Rows it cannot state
keep the reason (MLPerf's dataset-length rows publish no mean input length, and the file is never
filled by guessing). Assumptions the rows leave open are stated once, here.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources

CSV_FILE = "serving_runs.csv"

MODELS = {
    "Llama-3.1-8B-Instruct": "llama3.1-8b", "Llama-3.3-70B-Instruct": "llama3.3-70b",
    "Llama-3.1-405B-Instruct": "llama3.1-405b", "Qwen3-235B-A22B": "qwen3-235b-a22b",
    "Llama-4-Maverick-17B-128E-Instruct": "llama4-maverick", "Llama-2-70B-chat": "llama2-70b",
    "Mixtral-8x7B-Instruct": "mixtral-8x7b",
}
"""Published model names -> meshplan presets."""
CLUSTERS = {"H100": "dgx-h100", "H200": "dgx-h200", "B200": "dgx-b200", "GB200": "gb200-nvl72", "MI300X": "mi300x-8"}
"""The first word of the ``gpu`` column -> the node preset of that GPU."""
KV_DTYPE_ASSUMED = "fp8"
"""``kv_cache_dtype`` is not stated by the TensorRT-LLM table; its FP8 / FP4 ModelOpt checkpoints
ship FP8 KV-cache scales, so the KV cache is taken as FP8 [assumption]."""
EP_ASSUMED = "ep = tp for the MoE rows with attention DP: the table's command template passes --ep [assumption]"


@dataclass(frozen=True)
class ServingRun:
    """One published measurement, as ``serve-estimate`` arguments and the measured figures."""

    row: int
    source: str
    model: str
    cluster: str
    gpu: str
    gpus: int
    tp: int
    pp: int
    ep: int
    attention_dp: bool
    precision: str
    kv_dtype: str
    engine: str
    isl: int
    osl: int
    concurrency: int | None
    """Stated in-flight requests; None for maximum-throughput runs."""
    measured_tokens_per_s_per_gpu: float
    ttft_ms: float | None
    tpot_ms: float | None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _precision(text: str) -> str:
    return "fp4" if text.startswith("fp4") else "fp8" if text.startswith("fp8") else "bf16"


def _engine(framework: str) -> str:
    return "vllm" if framework.startswith("vLLM") else "sglang" if framework.startswith("SGLang") else "trtllm"


def parse_row(index: int, raw: dict[str, str]) -> ServingRun | str:
    """The run of one CSV row, or why ``serve-estimate`` cannot state it."""
    model = MODELS.get(raw["model"])
    cluster = CLUSTERS.get(raw["gpu"].split("-")[0])
    if model is None or cluster is None:
        return f"no preset for {raw['model']} on {raw['gpu']}"
    if not (raw["isl"].isdigit() and raw["osl"].isdigit()):
        return "lengths vary over a dataset whose mean input length the row does not publish"
    if raw["pd_mode"] != "aggregated":
        return "disaggregated rows are not in this file's calibration set"
    tp, pp = int(raw["tp"]), int(raw["pp"] or 1)
    attention_dp = raw["attention_dp"].startswith("enable_attention_dp: true")
    ep = int(raw["ep"]) if raw["ep"].isdigit() else (tp if attention_dp else 1)
    conc = int(raw["concurrency"]) if raw["concurrency"].isdigit() else None
    kv = raw["kv_cache_dtype"] if raw["kv_cache_dtype"] in ("fp8", "bf16") else KV_DTYPE_ASSUMED
    return ServingRun(row=index, source=raw["source"], model=model, cluster=cluster, gpu=raw["gpu"].split("-")[0],
                      gpus=int(raw["num_gpus"]), tp=tp, pp=pp, ep=ep, attention_dp=attention_dp,
                      precision=_precision(raw["weight_precision"]), kv_dtype=kv, engine=_engine(raw["framework"]),
                      isl=int(raw["isl"]), osl=int(raw["osl"]), concurrency=conc,
                      measured_tokens_per_s_per_gpu=float(raw["out_tok_s_per_gpu"]),
                      ttft_ms=_float(raw["ttft_mean_ms"]), tpot_ms=_float(raw["tpot_mean_ms"]))


def read_rows() -> list[dict[str, str]]:
    """Every row of the packaged CSV, as text."""
    text = resources.files(__package__).joinpath(CSV_FILE).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def serving_runs() -> tuple[list[ServingRun], list[tuple[int, str]]]:
    """(runs serve-estimate can state, [(row index, reason)] for the others)."""
    runs: list[ServingRun] = []
    skipped: list[tuple[int, str]] = []
    for index, raw in enumerate(read_rows()):
        parsed = parse_row(index, raw)
        if isinstance(parsed, str):
            skipped.append((index, parsed))
        else:
            runs.append(parsed)
    return runs, skipped
