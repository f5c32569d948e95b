"""Context parallelism's own activation memory: the K and V each rank gathers from its cp group.

Kept apart from the engine-independent bookkeeping (``costmodel.memory``, ``costmodel.activations``):
the only term context parallelism adds on top of a block's activations at ``seq / cp`` local tokens.
"""

from __future__ import annotations

from costmodel.local import ACT_BYTES, LocalConfig
from costmodel.specs import TransformerLayer


def cp_gathered_kv_bytes(layer: TransformerLayer, cfg: LocalConfig) -> float:
    """Bytes one block's attention keeps for backward beyond its local K and V when it all-gathers
    them over the cp group, per micro-batch on one GPU: the other ``cp - 1`` ranks' K and V.

    The native runtime's all-gather-KV attention (``planner.runtime.context_parallel``; Llama Team
    2024, "The Llama 3 Herd of Models", section 3.3.2) hands SDPA the gathered K and V, which autograd
    keeps for SDPA's backward: ``cp`` times the local K and V instead of once. The runtime's decoder
    repeats K and V to every query head before SDPA (``costmodel.memory.eager_block_extra_bytes``
    counts the local copy so, 4q bytes per token in bf16), so the gathered copy is ``q`` wide:
    ``2 (K, V) x ACT_BYTES x q / tp x (cp - 1)`` bytes per local token."""
    if cfg.cp == 1:
        return 0.0
    return cfg.tokens * 2 * ACT_BYTES * layer.q_width / cfg.tp * (cfg.cp - 1)
