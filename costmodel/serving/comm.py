"""Communication of a serving step, priced by the training model's collectives (``costmodel.comm``).

- TP: two all-reduces of the token activations per block (after attention and after the MLP;
  Shoeybi et al., Megatron-LM arXiv:1909.08053 §3, Fig. 3), bf16, priced per engine and algorithm
  in :mod:`costmodel.serving.allreduce`.
- EP with attention DP: dispatch and combine all-to-alls of each token's hidden state to its top-k
  experts (DeepSeek-V3 arXiv:2412.19437 §3.2.2; dispatch in FP8, combine in BF16 as its §3.3.2
  states).
- PP: one point-to-point hand-off of the activations per stage boundary (Narayanan et al. SC'21 §2.2).
- Disaggregation: the prompt's KV cache moves from the prefill worker to a decode worker over the
  network (Zhong et al., "DistServe", OSDI'24 §4.3; Patel et al., "Splitwise", ISCA'24 §4.2).
"""

from __future__ import annotations

from costmodel.comm import all_gather, all_to_all, place_group, reduce_scatter, send_recv
from costmodel.specs import ClusterSpec

ACTIVATION_BYTES = 2.0
"""Bytes per activation element between layers (bf16)."""
DISPATCH_BYTES = 1.0
"""Bytes per element of the token dispatch to experts (FP8, DeepSeek-V3 §3.3.2)."""


def ep_all_to_all(cluster: ClusterSpec, ep: int, tokens_per_gpu: float, hidden: int, top_k: int) -> float:
    """Seconds of one MoE layer's dispatch (FP8) and combine (BF16) all-to-alls over ``ep`` GPUs, each
    sending its ``tokens_per_gpu`` tokens to ``top_k`` experts."""
    if ep <= 1 or tokens_per_gpu <= 0:
        return 0.0
    group = place_group(ep, 1, cluster.gpus_per_node)
    payload = tokens_per_gpu * top_k * hidden
    return all_to_all(cluster, group, payload * DISPATCH_BYTES) + all_to_all(cluster, group, payload * ACTIVATION_BYTES)


ROUTING_BYTES_PER_CHOICE = 4.0 + 4.0
"""Bytes per token and top-k choice the attention-DP all-gather carries beside the hidden state:
the int32 expert id and the fp32 router weight (TensorRT-LLM ``CutlassFusedMoE.forward_chunk``
asserts ``token_selected_experts`` int32 and ``token_final_scales`` float32 and all-gathers both
with the activations)."""


def dispatch_element_bytes(precision: str, experts_only: bool, fp4_tensor_cores: bool, block_scaled: bool) -> float:
    """Bytes per hidden element of a token as TensorRT-LLM's attention-DP MoE all-gathers it: after
    the MoE input's quantisation (``run_post_quant_allgather``): NVFP4 0.5 B plus an FP8 scale per
    16 elements; a weight-only MXFP4 checkpoint on FP4 tensor cores MXFP8, 1 B plus an E8M0 scale
    per 32 (``mxfp8_quantize``); per-tensor FP8 1 B (``static_quantize_e4m3_per_tensor``); bf16
    where the MoE quantises inside its kernel (DeepSeek's block-scaled FP8,
    ``use_deepseek_fp8_block_scale``), the experts' activations are bf16 (weight-only MXFP4 without
    FP4 tensor cores) or the model is bf16 (TensorRT-LLM ``tensorrt_llm/_torch/modules/fused_moe/
    fused_moe_cutlass.py``, ``forward_chunk``)."""
    if precision == "fp4" and experts_only:
        return 1.0 + 1.0 / 32 if fp4_tensor_cores else ACTIVATION_BYTES
    if precision == "fp4":
        return 0.5 + 1.0 / 16
    if precision == "fp8" and not block_scaled:
        return DISPATCH_BYTES
    return ACTIVATION_BYTES


NODE_NVLINK_GPUS = 8
"""GPUs of the largest NVLink domain that is one node (DGX / HGX H100, H200, B200): a larger domain
(GB200 / GB300 NVL72) is a multi-node NVLink system, on which TensorRT-LLM's MNNVL all-to-all runs
(``MnnvlMemory.supports_mnnvl``)."""


def gathers_for_dp(engine_gathers: bool, cluster: ClusterSpec, ep: int, top_k: int) -> bool:
    """Whether an attention-DP MoE layer exchanges its tokens by all-gather and reduce-scatter
    (:func:`dp_gather_scatter`) rather than all-to-all: where the engine does
    (``EngineDefaults.dp_moe_allgather``) unless its MNNVL all-to-all applies, which TensorRT-LLM
    1.0-1.1 enable only for ``moe_ep_size > top_k`` with attention DP on a multi-node NVLink system
    (``CutlassFusedMoE.enable_alltoall``: ``mapping.moe_ep_size > routing_method.experts_per_token``
    and ``MnnvlMemory.supports_mnnvl()``; later releases' ``TRTLLMGenFusedMoE`` prefer an NVLink
    one-sided all-to-all everywhere, which this model does not follow [version: 1.0-1.1])."""
    if not engine_gathers:
        return False
    return not (cluster.gpus_per_node > NODE_NVLINK_GPUS and ep > top_k)


def dp_gather_scatter(cluster: ClusterSpec, ranks: int, tokens: float, hidden: int, top_k: int,
                      element_bytes: float) -> float:
    """Seconds of one MoE layer's attention-DP exchange as an all-gather of all ``tokens`` of the
    ``ranks`` GPUs (hidden state at ``element_bytes`` per element, plus :data:`ROUTING_BYTES_PER_CHOICE`
    per top-k choice) before the experts and a reduce-scatter of their bf16 outputs after (NCCL ring
    collectives, ``costmodel.comm``; ``EngineDefaults.dp_moe_allgather``)."""
    if ranks <= 1 or tokens <= 0:
        return 0.0
    group = place_group(ranks, 1, cluster.gpus_per_node)
    gathered = tokens * (hidden * element_bytes + top_k * ROUTING_BYTES_PER_CHOICE)
    return all_gather(cluster, group, gathered) + reduce_scatter(cluster, group, tokens * hidden * ACTIVATION_BYTES)


def pp_hand_off(cluster: ClusterSpec, tokens: float, hidden: int, across_nodes: bool = False) -> float:
    """Seconds to pass ``tokens`` activations to the next pipeline stage."""
    return send_recv(cluster, tokens * hidden * ACTIVATION_BYTES, across_nodes)


def kv_transfer(cluster: ClusterSpec, kv_bytes: float, senders: int, across_nodes: bool = True) -> float:
    """Seconds to move one request's prompt KV cache (``kv_bytes`` in all) from the ``senders`` GPUs
    of a prefill worker to a decode worker, each GPU sending its share in parallel (NIXL / Mooncake
    transfer engines move each rank's blocks directly)."""
    if kv_bytes <= 0:
        return 0.0
    return send_recv(cluster, kv_bytes / max(1, senders), across_nodes)
