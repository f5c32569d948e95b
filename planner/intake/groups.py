"""Cluster arguments that name GPU groups, or come with ``--slow`` / ``--down``: is it one, and load it.

``plan``, ``estimate`` and ``sweep`` all read a cluster argument this way before they decide between
the homogeneous and the heterogeneous path (``profiles.groups``, ``profiles.degrade``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from costmodel.hetero import HeteroCluster
from planner.errors import InputError


def names_groups(cluster: Any) -> bool:
    """Whether a cluster argument names groups: ``C:N[,C:N]`` or a JSON file with ``groups``."""
    from profiles import is_group_spec

    if not isinstance(cluster, (str, os.PathLike)):
        return False
    if isinstance(cluster, str) and is_group_spec(cluster):
        return True
    path = Path(os.fspath(cluster))
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and "groups" in data


def resolve_hetero(cluster: Any, gpus: int | None, slow: Any = None, down: Any = None, headroom_gib: float = 0.0) -> HeteroCluster:
    """The cluster as groups with ``--slow`` / ``--down`` applied; :class:`InputError` on bad input."""
    from costmodel.hetero import ClusterGroup
    from costmodel.specs import ClusterSpec
    from profiles import degrade, load_hetero_cluster

    try:
        if isinstance(cluster, ClusterSpec):  # the API's cluster object: one group of ``gpus`` GPUs
            if not isinstance(gpus, int) or gpus <= 0 or gpus % cluster.gpus_per_node:
                raise InputError(f"{gpus} GPUs is not a whole number of {cluster.gpus_per_node}-GPU nodes of {cluster.name}")
            loaded = HeteroCluster(name=cluster.name, groups=(ClusterGroup(cluster=cluster, gpus=gpus),))
        elif isinstance(cluster, (str, os.PathLike)):
            loaded = load_hetero_cluster(cluster, gpus)
        else:
            raise InputError(f"cluster must be a preset name, a JSON file, GPU groups or a ClusterSpec, not {type(cluster).__name__}")
        hetero = degrade(loaded, slow, down)
    except ValueError as err:  # profiles.ProfileError, pydantic's checks
        raise InputError(str(err).splitlines()[0]) from None
    if not headroom_gib:
        return hetero
    groups = tuple(g.model_copy(update={"cluster": g.cluster.model_copy(
        update={"runtime_overhead_gib": g.cluster.runtime_overhead_gib + headroom_gib})}) for g in hetero.groups)
    return hetero.model_copy(update={"groups": groups})
