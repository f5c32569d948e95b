"""What each serving engine's defaults do to memory and batching, as data.

Each value names the engine's own flag and where its default is set. They bound the batch (KV
blocks, the scheduler's sequence cap, tokens per step) and decide what memory the KV cache gets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ServingEngine = Literal["vllm", "sglang", "trtllm"]
ENGINES: tuple[ServingEngine, ...] = ("vllm", "sglang", "trtllm")


@dataclass(frozen=True)
class EngineDefaults:
    """One engine's memory and scheduler defaults."""

    block_tokens: int
    """Tokens per KV cache block (page)."""
    memory_fraction: float
    """Share of memory the engine takes for weights + KV (or, with ``fraction_of_free``, for KV)."""
    fraction_of_free: bool
    """The fraction applies to the memory left after weights and workspace (TensorRT-LLM)."""
    max_batch: int
    """Scheduler cap on sequences in flight per instance."""
    max_num_tokens: int
    """Tokens one engine step may schedule (prefill chunk plus decode tokens)."""
    source: str


DEFAULTS: dict[ServingEngine, EngineDefaults] = {
    "vllm": EngineDefaults(
        block_tokens=16, memory_fraction=0.90, fraction_of_free=False, max_batch=1024, max_num_tokens=8192,
        source="vLLM v0.10 EngineArgs: block_size 16 (CacheConfig), gpu_memory_utilization 0.9, V1 defaults "
               "max_num_seqs 1024 / max_num_batched_tokens 8192 for the API server on >= 70 GiB GPUs "
               "(vllm/engine/arg_utils.py, _set_default_args_v1)"),
    "sglang": EngineDefaults(
        block_tokens=1, memory_fraction=0.88, fraction_of_free=False, max_batch=4096, max_num_tokens=8192,
        source="SGLang v0.4 ServerArgs: page_size 1, mem_fraction_static ~0.88 for 80-160 GB GPUs at tp 1-8, "
               "chunked_prefill_size 8192, max_running_requests derived from the KV pool (capped here at 4096) "
               "(python/sglang/srt/server_args.py)"),
    "trtllm": EngineDefaults(
        block_tokens=32, memory_fraction=0.90, fraction_of_free=True, max_batch=8192, max_num_tokens=8192,
        source="TensorRT-LLM v1.0 KvCacheConfig: tokens_per_block 32, free_gpu_memory_fraction 0.9 of the "
               "memory free after weights; trtllm-bench max-throughput runs with CUDA-graph batches up to "
               "8192 and max_num_tokens 8192 (docs/source/performance/perf-overview.md)"),
}
