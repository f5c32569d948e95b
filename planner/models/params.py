"""Parameter counts per layer and per model: the cost model's own counts (``costmodel.params``),
re-exported for the planner's intake code and its tests."""

from costmodel.params import (
    attention_params,
    count_active_params,
    count_params,
    expert_params,
    layer_active_params,
    layer_params,
    mlp_params,
    norm_params,
)

__all__ = [
    "norm_params",
    "attention_params",
    "mlp_params",
    "expert_params",
    "layer_params",
    "layer_active_params",
    "count_params",
    "count_active_params",
]
