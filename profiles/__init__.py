"""Hardware profiles: GPU datasheet numbers, node presets and measured efficiencies, with their sources.

Data lives in ``gpus.json`` and ``clusters.json`` next to this file; every number there carries a
citation in the entry's ``"sources"`` object. The loaders return the plain spec types of
:mod:`costmodel.specs` and raise :class:`ProfileError` (one-line message) on bad input; ``profiles``
never imports ``planner`` and imports nothing heavy (no torch, no pulp).
"""

from __future__ import annotations

from profiles.degrade import Slowdown, apply, degrade, parse_down, parse_slow
from profiles.errors import ProfileError
from profiles.groups import is_group_spec, is_groups_file, load_hetero_cluster, one_cluster
from profiles.loader import (
    cluster_for_gpu,
    cluster_sources,
    gpu_sources,
    list_clusters,
    list_gpus,
    load_cluster,
    load_gpu,
)

__all__ = [
    "Slowdown",
    "apply",
    "degrade",
    "is_group_spec",
    "is_groups_file",
    "load_hetero_cluster",
    "one_cluster",
    "parse_down",
    "parse_slow",
    "ProfileError",
    "cluster_for_gpu",
    "cluster_sources",
    "gpu_sources",
    "list_clusters",
    "list_gpus",
    "load_cluster",
    "load_gpu",
]
