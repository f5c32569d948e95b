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

from costmodel.comm import all_to_all, place_group, send_recv
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
