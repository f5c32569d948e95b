"""Memory of one serving GPU: weights, activation workspace, runtime, and what is left for KV."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.serving.engines import EngineDefaults
from costmodel.serving.shape import ModelShape
from costmodel.serving.specs import Instance, WeightPrecision
from costmodel.serving.step import weights_bytes_per_gpu
from costmodel.specs import ClusterSpec

GIB = 2.0**30
LOGIT_BYTES = 4.0
"""Logits are computed in fp32 for sampling (vLLM ``Sampler``, TensorRT-LLM ``gather_output``)."""
CUDA_GRAPH_GIB = 0.5
"""Memory the captured CUDA graphs keep (vLLM logs "Graph capturing finished ... took 0.3-0.8 GiB"
for 8-70B models on H100) [assumption]."""


@dataclass(frozen=True)
class GpuMemory:
    """Bytes on one GPU of an instance."""

    weights: float
    workspace: float
    runtime: float
    kv_cache: float
    """Bytes given to KV blocks (negative: the weights and workspace alone do not fit)."""
    capacity: float

    @property
    def fits(self) -> bool:
        return self.kv_cache > 0

    @property
    def shortfall(self) -> float:
        """Bytes missing for weights + workspace + runtime (0 when they fit)."""
        return max(0.0, self.weights + self.workspace + self.runtime - self.capacity)


def workspace_bytes(shape: ModelShape, instance: Instance, engine: EngineDefaults) -> float:
    """Peak activation workspace of one step of ``max_num_tokens`` tokens: the widest block's
    intermediate (gate and up projections, bf16) and the residual stream, plus fp32 logits for
    a full batch of sampled tokens (the engines' profiling run sizes exactly this)."""
    tokens = engine.max_num_tokens / (instance.tp if instance.attention_dp else 1)
    widest = max(max(b.layer.ffn_hidden_size * (b.layer.moe_top_k or 1), b.layer.shared_expert_ffn_hidden_size)
                 for b in shape.blocks)
    act = tokens * (2.0 * widest / instance.tp + 4.0 * shape.hidden_size) * 2.0
    logits = min(engine.max_batch, engine.max_num_tokens) * shape.vocab_size / instance.tp * LOGIT_BYTES
    return act + logits


def gpu_memory(cluster: ClusterSpec, shape: ModelShape, instance: Instance, precision: WeightPrecision,
               engine: EngineDefaults, mx: bool = False, experts_only: bool = False,
               moe_only: bool = False) -> GpuMemory:
    """How one GPU's memory divides: KV gets the engine's fraction of all memory less everything else
(vLLM ``gpu_memory_utilization``, ``vllm/v1/worker/gpu_worker.py::determine_available_memory``),
or of the memory left after it (TensorRT-LLM ``free_gpu_memory_fraction``)."""
    capacity = cluster.gpu.hbm_gib * GIB
    weights = weights_bytes_per_gpu(shape, instance, precision, mx, experts_only, moe_only)
    work = workspace_bytes(shape, instance, engine)
    runtime = (cluster.runtime_overhead_gib + CUDA_GRAPH_GIB) * GIB
    free = capacity - weights - work - runtime
    kv = free * engine.memory_fraction if engine.fraction_of_free else capacity * engine.memory_fraction - weights - work - runtime
    return GpuMemory(weights=weights, workspace=work, runtime=runtime, kv_cache=min(kv, free), capacity=capacity)
