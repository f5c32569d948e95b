"""Resolve the user's model and cluster arguments into specs, turning every failure into InputError."""

from __future__ import annotations

from typing import Any

from costmodel.specs import ClusterSpec, ModelSpec
from planner.errors import InputError


def resolve_model_arg(model: Any, trace: bool = False) -> ModelSpec:
    """A ``ModelSpec``, a preset name / config.json path / ``file.py:factory`` string, or an
    ``nn.Module`` (traced on the meta device). With ``trace``, a config.json builds the Hugging Face
    model on the meta device and traces it instead of reading the config's numbers."""
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, str) and trace:
        if not model.endswith(".json"):
            raise InputError(f"--trace applies to a Hugging Face config.json, not {model!r}; drop --trace")
        from planner.trace import model_from_hf_config

        return model_from_hf_config(model)
    if isinstance(model, str):
        from planner.models import resolve_model

        return resolve_model(model)
    if hasattr(model, "named_parameters"):
        from planner.trace import model_from_module

        return model_from_module(model)
    raise InputError(f"model must be a preset name, a config.json path, a factory 'file.py:fn' or an nn.Module, not {type(model).__name__}")


def resolve_cluster_arg(cluster: Any) -> ClusterSpec:
    """A ``ClusterSpec``, or a preset name / cluster JSON path."""
    if isinstance(cluster, ClusterSpec):
        return cluster
    from profiles import ProfileError, load_cluster

    try:
        return load_cluster(cluster)
    except ProfileError as err:
        raise InputError(str(err)) from None
