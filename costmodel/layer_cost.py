"""Cost of any layer for one micro-batch on one GPU: dispatch on the layer kind."""

from __future__ import annotations

from costmodel.layer_other import embedding_cost, generic_cost, head_cost, norm_cost
from costmodel.layer_transformer import transformer_cost
from costmodel.local import LayerCost, LocalConfig
from costmodel.specs import ClusterSpec, EmbeddingLayer, HeadLayer, Layer, NormLayer, TransformerLayer


def layer_cost(layer: Layer, cfg: LocalConfig, cluster: ClusterSpec) -> LayerCost:
    """Cost of ``layer`` for one micro-batch on one GPU under ``cfg``."""
    if isinstance(layer, TransformerLayer):
        return transformer_cost(layer, cfg, cluster)
    if isinstance(layer, EmbeddingLayer):
        return embedding_cost(layer, cfg, cluster)
    if isinstance(layer, HeadLayer):
        return head_cost(layer, cfg, cluster)
    if isinstance(layer, NormLayer):
        return norm_cost(layer, cfg, cluster)
    return generic_cost(layer, cfg, cluster)
