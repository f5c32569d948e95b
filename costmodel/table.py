"""A model's layers grouped for fast repeated estimation, and the default stage split.

Identical layers (a preset repeats one block object; traced models repeat equal blocks) share one
group, so a step estimate costs O(groups), not O(layers): per-layer costs are memoised per group and
local configuration in the table, which the caller owns (no module-level state).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from costmodel.flops import model_flops_per_step
from costmodel.layer_cost import layer_cost
from costmodel.local import LayerCost, LocalConfig
from costmodel.specs import ClusterSpec, GenericLayer, Layer, ModelSpec, TransformerLayer

RECOMPUTE_CODES = ("none", "selective", "full")


@dataclass
class CostTable:
    """Per-model, per-cluster memo of layer costs. Build with :func:`build_cost_table`."""

    model: ModelSpec
    cluster: ClusterSpec
    groups: tuple[Layer, ...]
    """Distinct layers, in order of first appearance."""
    layer_group: np.ndarray
    """Group index of every layer of the model."""
    recomputable: np.ndarray
    """Whether recomputation applies to each layer (transformer and generic layers)."""
    cut_extra_bytes_per_token: np.ndarray
    """For a pipeline cut after layer i: bytes per token of the non-neighbour edges spanning it
    (skip connections, encoder outputs read by later decoder layers); 0 for a chain."""
    _costs: dict[tuple[int, LocalConfig], LayerCost] = field(default_factory=dict, repr=False)
    _flops: dict[tuple[int, int], float] = field(default_factory=dict, repr=False)
    _prefix: dict[object, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)
    _splits: dict[int, tuple[int, ...]] = field(default_factory=dict, repr=False)
    _bounds: dict[tuple[int, ...], np.ndarray] = field(default_factory=dict, repr=False)
    transformers_norm: bool = False
    """The model's blocks are transformers' own (``TransformerLayer.transformers_block``), so is its
    final norm (``costmodel.layer_other.norm_cost``)."""
    memo: dict = field(default_factory=dict, repr=False)
    """Scratch memo for callers that derive per-table data (``costmodel.ranks``)."""

    def key_prefix(self, signature: object, make_keys) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(distinct keys, index of each layer's key, prefix counts of each key over the layers),
        memoised by ``signature`` (the recompute setting that ``make_keys()`` turns into keys)."""
        hit = self._prefix.get(signature)
        if hit is None:
            keys = make_keys()
            present, inverse = np.unique(keys, return_inverse=True)
            cum = np.zeros((len(keys) + 1, len(present)))
            cum[np.arange(1, len(keys) + 1), inverse] = 1.0
            np.cumsum(cum, axis=0, out=cum)
            hit = self._prefix[signature] = (present, inverse, cum)
        return hit

    def bounds(self, sizes: tuple[int, ...]) -> np.ndarray:
        """Chunk start indices plus the end, for chunk sizes ``sizes`` (memoised)."""
        hit = self._bounds.get(sizes)
        if hit is None:
            hit = self._bounds[sizes] = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return hit

    def default_split(self, chunks: int) -> tuple[int, ...]:
        """:func:`default_stage_layers` of the table's model (memoised)."""
        if chunks not in self._splits:
            self._splits[chunks] = default_stage_layers(self.model, chunks)
        return self._splits[chunks]

    def cost(self, group: int, cfg: LocalConfig) -> LayerCost:
        """Cost of one layer of ``group`` under ``cfg`` (memoised)."""
        key = (group, cfg)
        hit = self._costs.get(key)
        if hit is None:
            hit = layer_cost(self.groups[group], cfg, self.cluster, self.transformers_norm)
            self._costs[key] = hit
        return hit

    def model_flops(self, global_batch: int, seq_len: int) -> float:
        """Model FLOPs of one step (memoised; see ``costmodel.flops``)."""
        key = (global_batch, seq_len)
        if key not in self._flops:
            self._flops[key] = model_flops_per_step(self.model.layers, global_batch, seq_len)
        return self._flops[key]


def build_cost_table(model: ModelSpec, cluster: ClusterSpec) -> CostTable:
    """Group ``model``'s layers by equality (hashing each layer once)."""
    index: dict[Layer, int] = {}
    ids: dict[int, int] = {}
    groups: list[Layer] = []
    layer_group = np.empty(len(model.layers), dtype=np.int64)
    for i, layer in enumerate(model.layers):
        g = ids.get(id(layer))
        if g is None:
            g = index.setdefault(layer, len(groups))
            if g == len(groups):
                groups.append(layer)
            ids[id(layer)] = g
        layer_group[i] = g
    recomputable = np.array([isinstance(x, (TransformerLayer, GenericLayer)) for x in model.layers])
    hf = any(getattr(x, "transformers_block", False) for x in model.layers)
    return CostTable(model, cluster, tuple(groups), layer_group, recomputable, _cut_extra(model), transformers_norm=hf)


def _cut_extra(model: ModelSpec) -> np.ndarray:
    """Bytes per token of extra edges crossing each cut; an edge leaving the layer right before the
    cut travels with that layer's output, which the cut already sends."""
    extra = np.zeros(len(model.layers))
    for edge in model.extra_edges:
        extra[edge.src + 1 : edge.dst] += edge.bytes_per_token
    return extra


def default_stage_layers(model: ModelSpec, chunks: int) -> tuple[int, ...]:
    """Megatron's default split: transformer blocks divided as evenly as possible over the chunks
    (earlier chunks take the remainder), the layers before the first block (embedding) joined to the
    first chunk and those after the last block (final norm, head) to the last chunk. A model without
    transformer blocks splits all its layers evenly."""
    body = [i for i, x in enumerate(model.layers) if isinstance(x, TransformerLayer)]
    n = len(model.layers)
    first, last = (body[0], body[-1]) if body else (0, n - 1)
    quotient, remainder = divmod(last - first + 1, chunks)
    sizes = [quotient + (1 if i < remainder else 0) for i in range(chunks)]
    sizes[0] += first
    sizes[-1] += n - 1 - last
    return tuple(int(x) for x in sizes)


def deepspeed_stage_layers(model: ModelSpec, chunks: int) -> tuple[int, ...]:
    """The split DeepSpeed's ``PipelineModule`` makes of ``model`` (``deepspeed/runtime/pipe/module.py``
    ``_partition_layers``): ``partition_method="type:transformer"`` when the blocks are contiguous and
    divide evenly over the chunks (the balanced split of 0/1 weights is then the equal one, the
    layers before the first block with the first chunk, those after the last with the last: the
    :func:`default_stage_layers`), else ``partition_method="uniform"`` over all layers
    (``deepspeed/runtime/utils.py`` ``partition_uniform``: the first ``n % chunks`` parts one larger)."""
    body = [i for i, x in enumerate(model.layers) if isinstance(x, TransformerLayer)]
    if body and body == list(range(body[0], body[-1] + 1)) and len(body) % chunks == 0:
        return default_stage_layers(model, chunks)
    quotient, remainder = divmod(len(model.layers), chunks)
    return tuple(quotient + (1 if i < remainder else 0) for i in range(chunks))
