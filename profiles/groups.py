"""Mixed clusters and degraded GPUs: ``dgx-h100:16,dgx-a100:32``, a groups JSON file, ``--slow`` and
``--down``, parsed into a :class:`costmodel.hetero.HeteroCluster`.

Forms of a cluster argument (:func:`load_hetero_cluster`):

- ``PRESET_OR_FILE:GPUS[,PRESET_OR_FILE:GPUS...]``: groups in that order, each a preset name or a
  single-group cluster JSON file, with its GPU count (whole nodes); links between groups default to
  the slower group's network (``costmodel.hetero.default_link``).
- A JSON file ``{"name": ..., "groups": [{"cluster": "dgx-h100", "gpus": 16}, ...], "links": ...}``:
  ``cluster`` is a preset, a file path (relative to the JSON file) or an inline cluster entry;
  ``links`` is one object ``{"bandwidth_gbps": B, "latency_us": L}`` for every pair, or a list of
  such objects each with ``"groups": [i, j]``.
- Any other argument (a preset or a single-group file) is ``gpus`` GPUs of it, exactly as
  :func:`profiles.load_cluster` loads it: any count ``meshplan plan`` takes, a partial last node a
  group of its own (:func:`one_cluster`).

GPUs and nodes are numbered across the cluster, group after group. Every problem raises
:class:`ProfileError` (a ``ValueError``) with a one-line message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from costmodel.hetero import ClusterGroup, GroupLink, HeteroCluster
from costmodel.specs import ClusterSpec
from profiles.entries import as_object, build_cluster
from profiles.errors import ProfileError
from profiles.jsonio import read_json
from profiles.loader import FIX_FILE, _find_gpu, _gpu_table, load_cluster

PathArg = str | os.PathLike[str]


def is_group_spec(arg: PathArg) -> bool:
    """Whether ``arg`` names groups (``C:N[,C:N]``) rather than one preset or file."""
    text = os.fspath(arg)
    return isinstance(arg, str) and ("," in text or _split_count(text) is not None)


def load_hetero_cluster(arg: PathArg, gpus: int | None = None) -> HeteroCluster:
    """The cluster ``arg`` names as groups (see the module docstring). ``gpus``, when given, must
    equal the groups' total; a single preset or file needs it (it is that group's size)."""
    if is_group_spec(arg):
        hetero = _from_spec(os.fspath(arg))
    elif is_groups_file(arg):
        hetero = _from_file(Path(os.fspath(arg)))
    else:
        if gpus is None:
            raise ProfileError(f"cluster '{os.fspath(arg)}' is one group: give its GPU count ('{os.fspath(arg)}:N')")
        return one_cluster(load_cluster(arg), gpus)
    if gpus is not None and gpus != hetero.gpus:
        counts = " + ".join(str(g.gpus) for g in hetero.groups)
        raise ProfileError(f"the groups of '{os.fspath(arg)}' hold {counts} = {hetero.gpus} GPUs, not {gpus}")
    return hetero


def one_cluster(cluster: ClusterSpec, gpus: int) -> HeteroCluster:
    """``gpus`` GPUs of one preset or file, every count ``meshplan plan`` takes without ``--slow``:
    its whole nodes as one group, and a last partial node (``--gpus 4`` or ``12`` of 8-GPU nodes) as
    a second group of the same preset with that many GPUs in its node. The partial node keeps the
    preset's links (inside it its NVLink, to the other group its network, ``default_link``) and GPU
    and node numbers run on across the groups, as they do on the plain cluster."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus <= 0:
        raise ProfileError(f"the GPU count must be a positive whole number, got {gpus!r:.40}")
    whole, rest = divmod(gpus, cluster.gpus_per_node)
    groups = [ClusterGroup(cluster=cluster, gpus=whole * cluster.gpus_per_node)] if whole else []
    if rest:
        groups.append(ClusterGroup(cluster=cluster.model_copy(update={"gpus_per_node": rest}), gpus=rest))
    return HeteroCluster(name=cluster.name, groups=tuple(groups))


def _split_count(text: str) -> tuple[str, int] | None:
    """``("dgx-h100", 16)`` from ``"dgx-h100:16"``; None when ``text`` has no ``:N`` tail."""
    name, sep, count = text.rpartition(":")
    if not sep or not name:
        return None
    if not count.strip().isdigit():
        raise ProfileError(f"cluster group '{text}': the GPU count after ':' must be a whole number, got '{count}'")
    return name.strip(), int(count)


def _from_spec(text: str) -> HeteroCluster:
    """Groups from ``C:N,C:N``."""
    groups = []
    for part in text.split(","):
        split = _split_count(part.strip())
        if split is None:
            raise ProfileError(f"cluster group '{part.strip()}' needs a GPU count: write it as '{part.strip()}:N'")
        name, count = split
        groups.append(_group(load_cluster(name), count, part.strip()))
    return HeteroCluster(name=text, groups=tuple(groups))


def _group(cluster: ClusterSpec, gpus: int, where: str) -> ClusterGroup:
    """One group, or a ProfileError when ``gpus`` is not whole nodes."""
    gpn = cluster.gpus_per_node
    if gpus <= 0 or gpus % gpn:
        raise ProfileError(f"cluster group '{where}': {gpus} GPUs is not a whole number of {gpn}-GPU nodes of {cluster.name}")
    return ClusterGroup(cluster=cluster, gpus=gpus)


def is_groups_file(arg: PathArg) -> bool:
    """Whether ``arg`` is a ``.json`` file whose object has ``"groups"``. The file is read through the
    gate (:mod:`profiles.jsonio`: size cap, nesting depth, UTF-8, no NaN), so a file it refuses raises
    the :class:`ProfileError` that :func:`profiles.load_cluster` would; a path that is not a regular
    ``.json`` file is False (the cluster loader reports it)."""
    path = Path(os.fspath(arg))
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    raw = read_json(path, f"cluster file '{path}'", FIX_FILE)
    return isinstance(raw, dict) and "groups" in raw


def _from_file(path: Path) -> HeteroCluster:
    """Groups and links from a groups JSON file (read through the gate, :mod:`profiles.jsonio`)."""
    where = f"cluster file '{path}'"
    obj = as_object(read_json(path, where, FIX_FILE), where)
    unknown = sorted(set(obj) - {"name", "groups", "links", "sources", "about"})
    if unknown:
        raise ProfileError(f"{where}: unknown field '{unknown[0]}' (a groups file has name, groups, links)")
    raw_groups = obj["groups"]
    if not isinstance(raw_groups, list) or not raw_groups:
        raise ProfileError(f"{where}: field 'groups' must be a non-empty array of {{\"cluster\": ..., \"gpus\": N}}")
    groups = tuple(_file_group(as_object(g, where, f"groups.{i}"), path, f"{where} groups.{i}") for i, g in enumerate(raw_groups))
    links = _links(obj.get("links"), len(groups), where)
    return HeteroCluster(name=str(obj.get("name", path.stem)), groups=groups, links=links)


def _file_group(obj: dict[str, Any], path: Path, where: str) -> ClusterGroup:
    """One ``{"cluster": ..., "gpus": N}`` entry."""
    if set(obj) - {"cluster", "gpus"} or "cluster" not in obj or "gpus" not in obj:
        raise ProfileError(f"{where}: a group is {{\"cluster\": preset, file or object, \"gpus\": N}}, got keys {sorted(obj)}")
    gpus, ref = obj["gpus"], obj["cluster"]
    if not isinstance(gpus, int) or isinstance(gpus, bool):
        raise ProfileError(f"{where}: field 'gpus' must be a whole number, got {gpus!r}")
    if isinstance(ref, dict):
        table = _gpu_table()
        cluster = build_cluster(ref, where, "group", lambda name, at: _find_gpu(table, name, at)).spec
    elif isinstance(ref, str):
        local = path.parent / ref
        cluster = load_cluster(local if ref.lower().endswith(".json") and local.is_file() else ref)
    else:
        raise ProfileError(f"{where}: field 'cluster' must be a preset name, a file path or a cluster object")
    return _group(cluster, gpus, where)


def _links(raw: object, count: int, where: str) -> tuple[GroupLink, ...]:
    """Stated links: one object for every pair, or a list with ``groups`` per link."""
    if raw is None:
        return ()
    pairs = [(a, b) for a in range(count) for b in range(a + 1, count)]
    items = [{**as_object(raw, where, "links"), "groups": pair} for pair in pairs] if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise ProfileError(f"{where}: field 'links' must be an object or an array of objects")
    links = []
    for i, item in enumerate(items):
        try:
            link = GroupLink.model_validate(as_object(item, where, f"links.{i}"))
        except ValidationError as exc:
            raise ProfileError(f"{where}: links.{i}: {exc.errors()[0]['msg']}") from None
        if not all(0 <= g < count for g in link.groups) or link.groups[0] == link.groups[1]:
            raise ProfileError(f"{where}: links.{i} joins groups {list(link.groups)}, but the groups are 0..{count - 1}")
        links.append(link)
    return tuple(links)
