"""Turn ``serve-estimate`` / ``serve-plan`` keywords into checked cost-model inputs.

Every problem found is collected and raised once as an :class:`~planner.errors.InputError` (one
line, factors printed: "tp 3 does not divide the 64 attention heads"). Nothing here estimates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from costmodel.serving.engines import DEFAULTS, ENGINES, EngineDefaults, on_gpu, recipe_kv_dtype
from costmodel.serving.shape import ModelShape, model_shape
from costmodel.serving.specs import Instance, ServingEfficiency, kv_bytes
from costmodel.serving.step import Hardware
from costmodel.specs import ClusterSpec, ModelSpec
from planner.errors import InputError
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

PRECISIONS = ("bf16", "fp8", "fp4")
KV_DTYPES = ("bf16", "fp8")


@dataclass(frozen=True)
class Context:
    """A checked model, machine, workload and engine."""

    spec: ModelSpec
    shape: ModelShape
    cluster: ClusterSpec
    hardware: Hardware
    engine_name: str
    engine: EngineDefaults
    isl: int
    osl: int
    precision: str
    kv_dtype: str

    @property
    def kv_element_bytes(self) -> float:
        return kv_bytes(self.kv_dtype)  # type: ignore[arg-type]


def _positive(problems: list[str], **values: Any) -> None:
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            problems.append(f"{name.replace('_', '-')} must be a positive number, got {value!r}")


def _choice(problems: list[str], name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        problems.append(f"unknown {name} {value!r}; choose {', '.join(choices)}")


def context(*, model: Any, cluster: Any, gpus: int, isl: int, osl: int, precision: str = "bf16",
            kv_dtype: str | None = None, engine: str = "vllm") -> Context:
    """Resolve and check what every serving call shares; raises InputError listing every problem.

    Engine support refused here: TensorRT-LLM off NVIDIA (``profiles/serving.json`` ``platform``);
    SGLang with an MXFP4 checkpoint (gpt-oss) on CDNA3, where its ``Mxfp4Config.from_config``
    raises unless ``mxfp_supported()`` finds a gfx95x (CDNA4) architecture
    (sgl-project/sglang ``python/sglang/srt/layers/quantization/mxfp4.py``, ``srt/utils/common.py``)."""
    problems: list[str] = []
    _positive(problems, gpus=gpus, isl=isl, osl=osl)
    for name, value in (("gpus", gpus), ("isl", isl), ("osl", osl)):
        if isinstance(value, float):
            problems.append(f"{name} must be a whole number, got {value!r}")
    _choice(problems, "precision", precision, PRECISIONS)
    if kv_dtype is not None:
        _choice(problems, "kv-dtype", kv_dtype, KV_DTYPES)
    _choice(problems, "engine", engine, ENGINES)
    if problems:
        raise InputError(*problems)
    spec = resolve_model_arg(model)
    spec_cluster = resolve_cluster_arg(cluster)
    from profiles.serving import default_kv_dtype, fp4_experts_only, fp4_moe_only, fp8_block_scaled, low_precision_rates

    rates = low_precision_rates(spec_cluster.gpu)
    blackwell, mxfp4_experts = _blackwell_mxfp4(spec, spec_cluster, precision)
    kv = kv_dtype or recipe_kv_dtype(DEFAULTS[engine], blackwell, mxfp4_experts) or \
        default_kv_dtype(spec.name, precision, DEFAULTS[engine].kv_auto_from_checkpoint)
    if engine == "trtllm" and rates.platform != "cuda":
        problems.append(f"TensorRT-LLM runs on NVIDIA GPUs only; {spec_cluster.gpu.name} is a {rates.platform} GPU: "
                        "use --engine vllm or sglang")
    if engine == "sglang" and precision == "fp4" and rates.platform == "rocm" and rates.peak_fp4_tflops is None \
            and fp4_experts_only(spec.name):
        problems.append(f"SGLang loads MXFP4 checkpoints on AMD only from CDNA4 (gfx950); {spec_cluster.gpu.name} is "
                        "CDNA3: use --engine vllm")
    if precision == "fp8" and spec_cluster.gpu.peak_fp8_tflops is None:
        problems.append(f"{spec_cluster.gpu.name} has no FP8 tensor cores; use --precision bf16")
    if precision == "fp4" and rates.peak_fp4_tflops is None and spec_cluster.gpu.peak_fp8_tflops is None:
        problems.append(f"{spec_cluster.gpu.name} runs no FP4 weights (weight-only MXFP4 kernels need Hopper or later); use --precision bf16")
    try:
        shape = model_shape(spec)
    except ValueError as err:
        problems.append(str(err))
    if problems:
        raise InputError(*problems)
    kernels = on_gpu(DEFAULTS[engine], blackwell, any(b.layer.is_moe for b in shape.blocks), mxfp4_experts)
    hw = Hardware(cluster=spec_cluster, rates=rates, efficiency=ServingEfficiency(), engine=kernels,
                  fp4_experts_only=mxfp4_experts,
                  fp4_moe_only=precision == "fp4" and fp4_moe_only(spec.name),
                  fp8_block_scaled=precision == "fp8" and fp8_block_scaled(spec.name))
    return Context(spec=spec, shape=shape, cluster=spec_cluster, hardware=hw, engine_name=engine,
                   engine=DEFAULTS[engine], isl=isl, osl=osl, precision=precision, kv_dtype=kv)


def _blackwell_mxfp4(spec: ModelSpec, cluster: ClusterSpec, precision: str) -> tuple[bool, bool]:
    """(the GPU is an NVIDIA Blackwell, the run is a weight-only MXFP4 checkpoint such as gpt-oss's)."""
    from profiles.serving import fp4_experts_only, low_precision_rates

    blackwell = low_precision_rates(cluster.gpu).platform == "cuda" and bool(cluster.gpu.mxfp8)
    return blackwell, precision == "fp4" and fp4_experts_only(spec.name)


def follows_recipe(model: Any, cluster: Any, precision: str, engine: str) -> bool:
    """Whether ``engine`` serves the model on the cluster by its own MXFP4-on-Blackwell recipe
    (``EngineDefaults.blackwell_mxfp4_recipe``: vLLM's ``GPT-OSS_Blackwell.yaml``), which the estimate
    prices and the export must therefore launch; False where the model or cluster does not resolve."""
    try:
        blackwell, mxfp4 = _blackwell_mxfp4(resolve_model_arg(model), resolve_cluster_arg(cluster), precision)
    except InputError:
        return False
    return blackwell and mxfp4 and engine in DEFAULTS and DEFAULTS[engine].blackwell_mxfp4_recipe  # type: ignore[index]


def instance_problems(shape: ModelShape, tp: Any, pp: Any, ep: Any, attention_dp: bool, what: str = "") -> list[str]:
    """Why an instance cannot run the model (empty when it can)."""
    problems: list[str] = []
    prefix = f"{what} " if what else ""
    _positive(problems, **{f"{prefix}tp": tp, f"{prefix}pp": pp, f"{prefix}ep": ep})
    if problems:
        return problems
    heads = shape.min_heads
    if not attention_dp and heads % tp:
        problems.append(f"{prefix}tp {tp} does not divide the {heads} attention heads; pick a divisor of {heads}")
    if pp > shape.num_layers:
        problems.append(f"{prefix}pp {pp} exceeds the {shape.num_layers} layers")
    if ep > 1 and not shape.is_moe:
        problems.append(f"{prefix}ep {ep} needs a mixture-of-experts model; {shape.name} is dense")
    elif ep > 1 and (tp % ep or shape.num_experts % ep):
        problems.append(f"{prefix}ep {ep} must divide tp {tp} and the {shape.num_experts} experts")
    if attention_dp and tp == 1:
        problems.append(f"{prefix}attention DP needs tp > 1 (it spreads attention over the tp GPUs)")
    return problems


def make_instance(shape: ModelShape, tp: int, pp: int, ep: int, attention_dp: bool, what: str = "") -> Instance:
    """The checked instance, or InputError."""
    problems = instance_problems(shape, tp, pp, ep, attention_dp, what)
    if problems:
        raise InputError(*problems)
    return Instance(tp=tp, pp=pp, ep=ep, attention_dp=attention_dp)


def latency_problems(ttft_ms: Any, tpot_ms: Any) -> list[str]:
    """Latency targets must be positive when given."""
    problems: list[str] = []
    _positive(problems, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
    return problems
