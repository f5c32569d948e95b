"""Cost of any layer for one micro-batch on one GPU: dispatch on the layer kind."""

from __future__ import annotations

from dataclasses import replace

from costmodel.layer_other import embedding_cost, generic_cost, head_cost, norm_cost
from costmodel.layer_transformer import transformer_cost
from costmodel.local import LayerCost, LocalConfig
from costmodel.specs import ClusterSpec, EmbeddingLayer, HeadLayer, Layer, NormLayer, TransformerLayer


def layer_cost(layer: Layer, cfg: LocalConfig, cluster: ClusterSpec, transformers_norm: bool = False) -> LayerCost:
    """Cost of ``layer`` for one micro-batch on one GPU under ``cfg``; a layer with a
    ``fixed_seq_len`` (a speech encoder) is costed at its own length, not the request's;
    ``transformers_norm``: a final norm is transformers' own (``costmodel.layer_other.norm_cost``)."""
    fixed = getattr(layer, "fixed_seq_len", 0)
    if fixed:
        cfg = replace(cfg, seq_len=fixed)
    if isinstance(layer, TransformerLayer):
        if layer.conv1d and cfg.tp > 1 and cfg.terms is not None and cfg.terms.replicates_conv1d_blocks:
            # run whole on every tp rank (EngineTerms.replicates_conv1d_blocks); the gathers around it
            # under SP are those of a replicated unit, not priced here
            cfg = replace(cfg, tp=1, sp=False)
        return transformer_cost(layer, cfg, cluster)
    if isinstance(layer, EmbeddingLayer):
        return embedding_cost(layer, cfg, cluster)
    if isinstance(layer, HeadLayer):
        return head_cost(layer, cfg, cluster)
    if isinstance(layer, NormLayer):
        return norm_cost(layer, cfg, cluster, transformers_norm)
    return generic_cost(layer, cfg, cluster)
