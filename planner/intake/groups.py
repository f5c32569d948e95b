"""Cluster arguments that name GPU groups, or come with ``--slow`` / ``--down``: is it one, and load it.

``plan``, ``estimate`` and ``sweep`` all read a cluster argument this way before they decide between
the homogeneous and the heterogeneous path (``profiles.groups``, ``profiles.degrade``).
"""

from __future__ import annotations

import os
from typing import Any

from costmodel.headroom import with_headroom
from costmodel.hetero import HeteroCluster
from planner.errors import InputError


def names_groups(cluster: Any) -> bool:
    """Whether a cluster argument names groups: ``C:N[,C:N]`` or a JSON file with ``groups``. The
    file is read through the gate (``profiles.jsonio``), so a file it refuses (too large, nested too
    deep, not JSON) raises :class:`InputError` with the line the cluster loader would print."""
    from profiles import ProfileError, is_group_spec, is_groups_file

    if not isinstance(cluster, (str, os.PathLike)):
        return False
    if isinstance(cluster, str) and is_group_spec(cluster):
        return True
    try:
        return is_groups_file(cluster)
    except ProfileError as err:
        raise InputError(str(err)) from None


def plain_cluster(cluster: HeteroCluster, arg: Any) -> bool:
    """Whether ``cluster``, resolved from the cluster argument ``arg``, is that argument unchanged: one
    preset, file or ClusterSpec (not groups) with no GPU slow and no node down. It may be two groups
    (a partial last node, ``profiles.one_cluster``); the caller then plans ``arg`` as it is."""
    undegraded = all(not g.down_nodes and all(s == 1.0 for s in g.speeds) for g in cluster.groups)
    return undegraded and not names_groups(arg)


def resolve_hetero(cluster: Any, gpus: int | None, slow: Any = None, down: Any = None, headroom_gib: float | None = None) -> HeteroCluster:
    """The cluster as groups with ``--slow`` / ``--down`` applied; :class:`InputError` on bad input."""
    from costmodel.specs import ClusterSpec
    from profiles import degrade, load_hetero_cluster, one_cluster

    try:
        if isinstance(cluster, ClusterSpec):  # the API's cluster object: ``gpus`` GPUs of it
            loaded = one_cluster(cluster, gpus)
        elif isinstance(cluster, (str, os.PathLike)):
            loaded = load_hetero_cluster(cluster, gpus)
        else:
            raise InputError(f"cluster must be a preset name, a JSON file, GPU groups or a ClusterSpec, not {type(cluster).__name__}")
        hetero = degrade(loaded, slow, down)
    except ValueError as err:  # profiles.ProfileError, pydantic's checks
        raise InputError(str(err).splitlines()[0]) from None
    if headroom_gib is None:
        return hetero
    groups = tuple(g.model_copy(update={"cluster": with_headroom(g.cluster, headroom_gib)}) for g in hetero.groups)
    return hetero.model_copy(update={"groups": groups})
