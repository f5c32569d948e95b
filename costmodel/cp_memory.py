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
    keeps for SDPA's backward: ``cp`` times the local K and V instead of once. The runtime's own
    decoder (``planner.runtime.models.Block``) repeats K and V to every query head before SDPA
    (``costmodel.memory.eager_block_extra_bytes`` counts the local copy so, 4q bytes per token in
    bf16), so the gathered copy is ``q`` wide: ``2 (K, V) x ACT_BYTES x q / tp x (cp - 1)`` bytes per
    local token. transformers' own blocks (``TransformerLayer.transformers_block``) hand SDPA the
    grouped K and V with ``enable_gqa`` (transformers ``integrations/sdpa_attention.py``), which
    ``allgather_attention`` gathers as they come: ``ACT_BYTES x (k + v) / tp x (cp - 1)``. Measured
    with check-memory on a planner-chosen Llama plan (h 2048, 32 heads, 4 KV heads, 22 blocks,
    seq 32,768, cp 4, micro-batch 2): 7.2 GiB of gathered K/V priced q wide that the tracker never saw."""
    if cfg.cp == 1:
        return 0.0
    width = layer.k_width + layer.v_width if layer.transformers_block else 2 * layer.q_width
    return cfg.tokens * ACT_BYTES * width / cfg.tp * (cfg.cp - 1)
