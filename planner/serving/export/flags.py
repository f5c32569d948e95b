"""The launch flags each engine release accepts, as data: flag name -> accepted choices (a tuple),
the value's type (int, float, str), or ``FLAG`` for a switch. Transcribed by hand, not extracted by
a program, from the argument definitions of the released versions named in ``source``; only the
flags the exports use are listed, and a choice list may lag the release in values the exports never
write. The exports are checked against these tables (``check_command``); the tests also run vLLM's
and SGLang's own argument code, fetched from the registry (``tests/planner/serving/test_engines_*.py``),
while TensorRT-LLM's is not reachable from a package registry (README, serving exports).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

FLAG = "switch"
"""A flag that takes no value."""


@dataclass(frozen=True)
class EngineFlags:
    engine: str
    version: str
    source: str
    program: tuple[str, ...]
    """The command words before the flags."""
    positional: int
    """Positional arguments after ``program`` (vLLM's and TRT-LLM's model)."""
    flags: dict[str, object]
    """flag -> tuple of choices, a type (int, float, str), or FLAG."""


VLLM = EngineFlags(
    engine="vllm", version="0.10.1",
    source="vllm-project/vllm v0.10.1: vllm/engine/arg_utils.py (EngineArgs.add_cli_args), "
           "vllm/entrypoints/openai/cli_args.py (make_arg_parser), vllm/config.py (CacheDType, BlockSize)",
    program=("vllm", "serve"), positional=1,
    flags={
        "--tensor-parallel-size": int, "--pipeline-parallel-size": int, "--data-parallel-size": int,
        "--enable-expert-parallel": FLAG, "--max-num-seqs": int, "--max-num-batched-tokens": int,
        "--gpu-memory-utilization": float, "--max-model-len": int, "--host": str, "--port": int,
        "--kv-cache-dtype": ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"),
        "--block-size": ("1", "8", "16", "32", "64", "128"),
        "--quantization": ("aqlm", "awq", "deepspeedfp", "tpu_int8", "fp8", "ptpc_fp8", "fbgemm_fp8", "modelopt",
                           "modelopt_fp4", "marlin", "bitblas", "gguf", "gptq_marlin_24", "gptq_marlin",
                           "gptq_bitblas", "awq_marlin", "gptq", "compressed-tensors", "bitsandbytes", "qqq", "hqq",
                           "experts_int8", "neuron_quant", "ipex", "quark", "moe_wna16", "torchao", "auto-round",
                           "rtn", "inc", "mxfp4"),
        "--kv-transfer-config": str, "--trust-remote-code": FLAG, "--compilation-config": str,
    })

SGLANG = EngineFlags(
    engine="sglang", version="0.4.10",
    source="sgl-project/sglang v0.4.10: python/sglang/srt/server_args.py (ServerArgs.add_cli_args)",
    program=("python", "-m", "sglang.launch_server"), positional=0,
    flags={
        "--model-path": str, "--tp-size": int, "--pp-size": int, "--dp-size": int, "--ep-size": int,
        "--enable-dp-attention": FLAG, "--mem-fraction-static": float, "--max-running-requests": int,
        "--chunked-prefill-size": int, "--page-size": int, "--context-length": int, "--host": str, "--port": int,
        "--kv-cache-dtype": ("auto", "fp8_e5m2", "fp8_e4m3"),
        "--quantization": ("awq", "fp8", "gptq", "marlin", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf",
                           "modelopt", "modelopt_fp4", "petit_nvfp4", "w8a8_int8", "w8a8_fp8", "moe_wna16", "qoq",
                           "w4afp8"),
        "--disaggregation-mode": ("null", "prefill", "decode"),
        "--disaggregation-transfer-backend": ("mooncake", "nixl"),
        "--nnodes": int, "--node-rank": int, "--dist-init-addr": str, "--trust-remote-code": FLAG,
    })

TRTLLM = EngineFlags(
    engine="trtllm", version="1.0.0",
    source="NVIDIA/TensorRT-LLM v1.0.0: tensorrt_llm/commands/serve.py (click options of trtllm-serve)",
    program=("trtllm-serve",), positional=1,
    flags={
        "--backend": ("pytorch", "trt", "_autodeploy"), "--tp_size": int, "--pp_size": int, "--ep_size": int,
        "--max_batch_size": int, "--max_num_tokens": int, "--max_seq_len": int,
        "--kv_cache_free_gpu_memory_fraction": float, "--host": str, "--port": int,
        "--extra_llm_api_options": str, "--trust_remote_code": FLAG,
    })

TABLES = {t.engine: t for t in (VLLM, SGLANG, TRTLLM)}


def _value_ok(kind: object, value: str) -> bool:
    if isinstance(kind, tuple):
        return value in kind
    try:
        kind(value)  # type: ignore[operator]
    except (TypeError, ValueError):
        return False
    return True


def check_command(engine: str, line: str) -> list[str]:
    """Problems of one launch command against ``engine``'s table (empty: every flag and value is
    accepted). Leading ``VAR=value`` environment assignments are skipped."""
    table = TABLES[engine]
    words = shlex.split(line)
    while words and "=" in words[0] and not words[0].startswith("-"):
        words.pop(0)
    if tuple(words[: len(table.program)]) != table.program:
        return [f"command does not start with {' '.join(table.program)}"]
    rest = words[len(table.program):]
    problems = ["missing positional model argument"] if len(rest) < table.positional else []
    rest = rest[table.positional:]
    i = 0
    while i < len(rest):
        flag = rest[i]
        kind = table.flags.get(flag)
        if kind is None:
            problems.append(f"{engine} {table.version} has no flag {flag}")
            i += 1
            continue
        if kind == FLAG:
            i += 1
            continue
        if i + 1 >= len(rest) or not _value_ok(kind, rest[i + 1]):
            problems.append(f"{flag} does not accept {rest[i + 1] if i + 1 < len(rest) else 'nothing'!r}")
        i += 2
    return problems
