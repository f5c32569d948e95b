"""Load GPU and cluster profiles: the packaged presets (``gpus.json``, ``clusters.json``) or a user's file.

Each call parses the packaged JSON afresh (a few kilobytes; the text is read once per process through
:func:`_packaged_text`) and builds new frozen specs, so nothing mutable is shared between callers.
"""

from __future__ import annotations

import functools
import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from costmodel.specs import ClusterSpec, GPUSpec
from profiles.entries import (
    ClusterEntry,
    GpuEntry,
    as_object,
    build_cluster,
    build_gpu,
    closest,
    did_you_mean,
    normalize_name,
)
from profiles.errors import ProfileError
from profiles.jsonio import read_json

GPUS_FILE = "gpus.json"
CLUSTERS_FILE = "clusters.json"
_LIST_GPUS_HINT = "run `meshplan list gpus` for the known GPUs"
_LIST_CLUSTERS_HINT = "run `meshplan list clusters` for the presets, or pass a path to a cluster JSON file"

FIX_FILE = "fix the file"
"""How to repair a cluster or groups file the gate (:mod:`profiles.jsonio`) refuses."""

PathArg = str | os.PathLike[str]


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------
def load_gpu(name: str) -> GPUSpec:
    """The GPU called ``name`` (case-insensitive; aliases such as ``h100`` or ``NVIDIA H100 80GB HBM3`` work)."""
    return _find_gpu(_gpu_table(), name, "").spec


def list_gpus() -> list[GPUSpec]:
    """Every packaged GPU, in the order of ``gpus.json``."""
    return [entry.spec for entry in _gpu_table().values()]


def load_cluster(arg: PathArg) -> ClusterSpec:
    """A cluster from a preset name (case-insensitive) or a path to a JSON file.

    The file holds one object in the format of a ``clusters.json`` entry, plus an optional ``"name"``
    (default: the file's stem). Its ``"gpu"`` is a GPU name from ``gpus.json`` (whose efficiency
    defaults the file's ``"efficiency"`` may override) or an inline GPU object with ``name``,
    ``peak_bf16_tflops``, ``hbm_gib``, ``hbm_bandwidth_gbps`` (then the file gives every efficiency
    field). Raises :class:`ProfileError` with a one-line message on any problem.
    """
    return _load_cluster_entry(arg).spec


def list_clusters() -> list[ClusterSpec]:
    """Every packaged cluster preset, in the order of ``clusters.json``."""
    gpus = _gpu_table()
    return [_build_preset(key, raw, gpus).spec for key, raw in _cluster_presets().items()]


def cluster_for_gpu(gpu_name: str) -> ClusterSpec:
    """The default node preset for a GPU (``h100`` -> ``dgx-h100``), for tools that only know the GPU."""
    gpus = _gpu_table()
    entry = _find_gpu(gpus, gpu_name, "")
    key = normalize_name(entry.default_cluster or "")
    presets = _cluster_presets()
    if key not in presets:
        raise ProfileError(
            f"GPU '{entry.spec.name}' has no default cluster preset in profiles/{GPUS_FILE}; {_LIST_CLUSTERS_HINT}"
        )
    return _build_preset(key, presets[key], gpus).spec


def cluster_sources(arg: PathArg) -> dict[str, str]:
    """The citation of every number of a cluster (preset or file), keyed ``gpu.X``, ``X`` or ``efficiency.X``."""
    return dict(_load_cluster_entry(arg).sources)


def gpu_sources(name: str) -> dict[str, str]:
    """The citation of every number of a packaged GPU, keyed ``X`` or ``efficiency.X``."""
    return dict(_find_gpu(_gpu_table(), name, "").sources)


# ----------------------------------------------------------------------------------------------
# Packaged data
# ----------------------------------------------------------------------------------------------
@functools.cache
def _packaged_text(filename: str) -> str:
    """The text of a data file shipped in this package (immutable, so caching it is safe)."""
    return resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")


def _packaged_section(filename: str, section: str) -> dict[str, Any]:
    """The ``section`` object of a packaged JSON file, parsed anew for each call."""
    where = f"profiles/{filename}"
    try:
        data = json.loads(_packaged_text(filename))
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    return as_object(as_object(data, where).get(section), where, section)


def _gpu_table() -> dict[str, GpuEntry]:
    """Packaged GPUs by normalized name, in file order."""
    table: dict[str, GpuEntry] = {}
    for key, raw in _packaged_section(GPUS_FILE, "gpus").items():
        table[normalize_name(key)] = build_gpu(raw, f"GPU '{key}' (profiles/{GPUS_FILE})", name=key)
    return table


def _cluster_presets() -> dict[str, Any]:
    """Raw packaged cluster entries by normalized name, in file order."""
    return {normalize_name(key): raw for key, raw in _packaged_section(CLUSTERS_FILE, "clusters").items()}


def _build_preset(key: str, raw: object, gpus: dict[str, GpuEntry]) -> ClusterEntry:
    """One packaged preset as a validated entry."""
    where = f"cluster preset '{key}' (profiles/{CLUSTERS_FILE})"
    entry_obj = as_object(raw, where)
    if "name" in entry_obj:
        raise ProfileError(f"{where}: a preset takes its name from its key; remove field 'name'")
    return build_cluster(entry_obj, where, key, lambda name, at: _find_gpu(gpus, name, at))


def _find_gpu(gpus: dict[str, GpuEntry], name: str, where: str) -> GpuEntry:
    """The GPU whose name or alias is ``name``, or a ProfileError with the nearest names."""
    key = normalize_name(name)
    if key in gpus:
        return gpus[key]
    for entry in gpus.values():
        if key in entry.aliases:
            return entry
    canonical = {alias: gpu for gpu, entry in gpus.items() for alias in (gpu, *entry.aliases)}
    close = [canonical[candidate] for candidate in closest(name, list(canonical))]
    prefix = f"{where}: " if where else ""
    raise ProfileError(f"{prefix}unknown GPU '{name}'{did_you_mean(close)}; {_LIST_GPUS_HINT}")


# ----------------------------------------------------------------------------------------------
# Presets or files
# ----------------------------------------------------------------------------------------------
def _load_cluster_entry(arg: PathArg) -> ClusterEntry:
    """Resolve ``arg`` to a preset or a file and build it."""
    if not isinstance(arg, (str, os.PathLike)):
        raise ProfileError(f"a cluster is a preset name or a JSON file path, got {type(arg).__name__}")
    text = os.fspath(arg)
    presets = _cluster_presets()
    key = normalize_name(text)
    if isinstance(arg, str) and not _looks_like_path(text) and key in presets:
        return _build_preset(key, presets[key], _gpu_table())
    if isinstance(arg, os.PathLike) or _looks_like_path(text) or Path(text).is_file():
        return _load_cluster_file(Path(text))
    close = closest(text, list(presets))
    raise ProfileError(f"unknown cluster preset '{text}'{did_you_mean(close)}; {_LIST_CLUSTERS_HINT}")


def _looks_like_path(text: str) -> bool:
    """A ``.json`` name or anything with a directory separator is a file, not a preset name."""
    separators = [sep for sep in (os.sep, os.altsep, "/") if sep]
    return text.lower().endswith(".json") or any(sep in text for sep in separators)


def _load_cluster_file(path: Path) -> ClusterEntry:
    """A user's cluster JSON file (one ``clusters.json`` entry, optional ``"name"``)."""
    where = f"cluster file '{path}'"
    obj = as_object(read_json(path, where, FIX_FILE), where)
    if "source" not in obj:
        obj = {**obj, "source": f"cluster file {path}"}
    gpus = _gpu_table()
    return build_cluster(obj, where, path.stem, lambda name, at: _find_gpu(gpus, name, at))
