"""Plain spec types the cost model reads: the model's layers, the hardware, the parallel configuration.

Three inputs, one output (calculon's shape): a :class:`ModelSpec` (what is computed), a
:class:`ClusterSpec` (what computes it) and a :class:`ParallelConfig` (how the work is split). Every
type is a frozen pydantic model with units in its field names; each field is documented where it is
declared. ``costmodel`` fills in nothing itself: ``planner`` builds models from presets, Hugging Face
configs or traced modules, and ``profiles`` loads hardware.

The types live by concern: ``costmodel.model_spec`` (layers, model), ``costmodel.hardware`` (GPU,
efficiency, cluster), ``costmodel.parallel`` (configuration) and ``costmodel.spec_types`` (the literal
choices); this module names them all, so that callers import every spec type from one place.
"""

from __future__ import annotations

from costmodel.hardware import ClusterSpec, EfficiencySpec, GPUSpec
from costmodel.model_spec import (
    EmbeddingLayer,
    GenericLayer,
    HeadLayer,
    Layer,
    LayerEdge,
    ModelSpec,
    NormLayer,
    TpMode,
    TransformerLayer,
)
from costmodel.parallel import ParallelConfig
from costmodel.spec_types import AttentionImpl, Engine, FfnAct, NormKind, Precision, Recompute, Schedule

__all__ = ["AttentionImpl", "ClusterSpec", "EfficiencySpec", "EmbeddingLayer", "Engine", "FfnAct", "GPUSpec", "GenericLayer",
           "HeadLayer", "Layer", "LayerEdge", "ModelSpec", "NormKind", "NormLayer", "ParallelConfig", "Precision", "Recompute",
           "Schedule", "TpMode", "TransformerLayer"]
