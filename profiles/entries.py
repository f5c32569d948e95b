"""Turn one JSON entry (a ``gpus.json`` or ``clusters.json`` value, or a user's cluster file) into specs.

Pure functions over parsed JSON: no file access. Every problem becomes a :class:`ProfileError` whose
one-line message names the entry (``where``) and the field, in dotted form (``efficiency.gemm_max``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from costmodel.specs import ClusterSpec, EfficiencySpec, GPUSpec
from profiles.errors import ProfileError

GPU_META_KEYS = ("efficiency", "sources", "default_cluster", "aliases")
"""Keys of a GPU entry that are not :class:`GPUSpec` fields."""
CLUSTER_META_KEYS = ("gpu", "efficiency", "sources", "measurements", "calibration")
"""Keys of a cluster entry the loader resolves itself before validating a :class:`ClusterSpec`.
``measurements`` (raw microbenchmark results, ``meshplan profile``) and ``calibration`` (the fit that
produced the efficiencies, ``meshplan calibrate``) are kept beside the numbers for the reader: JSON
objects the cost model does not read."""


@dataclass(frozen=True)
class GpuEntry:
    """A GPU with the data around it: compute-side efficiency defaults, citations, lookup names."""

    spec: GPUSpec
    efficiency: Mapping[str, Any] = field(default_factory=dict)
    """EfficiencySpec fields every cluster built on this GPU starts from."""
    sources: Mapping[str, str] = field(default_factory=dict)
    """Citation per field: ``peak_bf16_tflops``, ..., ``efficiency.gemm_max``, ..."""
    default_cluster: str | None = None
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterEntry:
    """A validated cluster and the citation of each of its numbers (``gpu.X``, ``X``, ``efficiency.X``)."""

    spec: ClusterSpec
    sources: Mapping[str, str]


def normalize_name(name: str) -> str:
    """Lookup key of a preset or GPU name: lower case, ``_`` and spaces as ``-`` ("NVIDIA H100" -> "nvidia-h100")."""
    return "-".join(name.strip().lower().replace("_", " ").split())


def closest(name: str, candidates: list[str]) -> list[str]:
    """Up to six candidates nearest to ``name`` (difflib ratio >= 0.5), best first."""
    return difflib.get_close_matches(normalize_name(name), candidates, n=6, cutoff=0.5)


def did_you_mean(names: list[str]) -> str:
    """``" (did you mean a, b?)"`` for the first three distinct names, or ``""`` when there are none."""
    return f" (did you mean {', '.join(list(dict.fromkeys(names))[:3])}?)" if names else ""


def as_object(raw: object, where: str, key: str = "") -> dict[str, Any]:
    """``raw`` as a JSON object, or a ProfileError saying what was found instead."""
    if isinstance(raw, dict):
        return raw
    what = f"field '{key}'" if key else "the entry"
    raise ProfileError(f"{where}: {what} must be a JSON object, got {_json_type(raw)}")


def build_gpu(raw: object, where: str, name: str | None = None) -> GpuEntry:
    """A :class:`GpuEntry` from a ``gpus.json`` value (``name`` = its key) or an inline ``"gpu"`` object.

    ``where`` prefixes error messages; an inline object (``name`` None) needs its own ``"name"``, and
    its field names are reported as ``gpu.X``.
    """
    obj = as_object(raw, where, "" if name is not None else "gpu")
    prefix = "" if name is not None else "gpu."
    fields = {k: v for k, v in obj.items() if k not in GPU_META_KEYS}
    if name is not None:
        fields["name"] = name
    spec = validate(GPUSpec, fields, where, prefix)
    aliases = obj.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise ProfileError(f"{where}: field '{prefix}aliases' must be a list of strings")
    default_cluster = obj.get("default_cluster")
    if default_cluster is not None and not isinstance(default_cluster, str):
        raise ProfileError(f"{where}: field '{prefix}default_cluster' must be a preset name string")
    return GpuEntry(
        spec=spec,
        efficiency=as_object(obj.get("efficiency", {}), where, f"{prefix}efficiency"),
        sources=read_sources(obj, where, prefix),
        default_cluster=default_cluster,
        aliases=tuple(normalize_name(a) for a in aliases),
    )


def build_cluster(
    raw: object, where: str, name: str, find_gpu: Callable[[str, str], GpuEntry]
) -> ClusterEntry:
    """A :class:`ClusterEntry` from one ``clusters.json`` value or a user's cluster file.

    ``"gpu"`` is a GPU name (resolved with ``find_gpu(name, where)``) or an inline GPU object. The
    efficiency is the GPU's defaults overridden by the entry's ``"efficiency"`` object. ``name`` is
    used when the entry has no ``"name"`` of its own.
    """
    obj = as_object(raw, where)
    if "gpu" not in obj:
        raise ProfileError(f"{where}: missing field 'gpu' (a GPU name such as 'h100-sxm', or a GPU object)")
    gpu_raw = obj["gpu"]
    gpu = find_gpu(gpu_raw, where) if isinstance(gpu_raw, str) else build_gpu(gpu_raw, where)
    overrides = as_object(obj.get("efficiency", {}), where, "efficiency")
    for key in ("measurements", "calibration"):
        as_object(obj.get(key, {}), where, key)
    fields = {k: v for k, v in obj.items() if k not in CLUSTER_META_KEYS}
    fields.setdefault("name", name)
    fields.update(gpu=gpu.spec, efficiency={**gpu.efficiency, **overrides})
    spec = validate(ClusterSpec, fields, where)
    sources = _merge_sources(gpu, overrides, read_sources(obj, where))
    return ClusterEntry(spec=spec, sources={**_default_sources({**gpu.efficiency, **overrides}), **sources})


def read_sources(obj: Mapping[str, Any], where: str, prefix: str = "") -> dict[str, str]:
    """The entry's ``"sources"`` object (field -> citation), checked to hold only strings."""
    sources = as_object(obj.get("sources", {}), where, f"{prefix}sources")
    bad = [key for key, value in sources.items() if not isinstance(value, str)]
    if bad:
        raise ProfileError(f"{where}: field '{prefix}sources.{bad[0]}' must be a citation string")
    return dict(sources)


def validate(model: type[BaseModel], data: dict[str, Any], where: str, prefix: str = "") -> Any:
    """``model.model_validate(data)``, with pydantic's errors folded into one ProfileError line."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(err, prefix) for err in exc.errors()]
        raise ProfileError(f"{where}: {'; '.join(problems)}") from None


def _describe(err: Mapping[str, Any], prefix: str) -> str:
    """One pydantic error as ``field 'a.b': message (got value)``."""
    loc = prefix + ".".join(str(part) for part in err["loc"])
    if err["type"] == "missing":
        return f"missing field '{loc}'"
    if err["type"] == "extra_forbidden":
        return f"unknown field '{loc}'"
    return f"field '{loc}': {err['msg']} (got {err['input']!r})"


def _merge_sources(
    gpu: GpuEntry, overrides: Mapping[str, Any], cluster_sources: Mapping[str, str]
) -> dict[str, str]:
    """Citations of a cluster: the GPU's (``gpu.X``; its efficiency ones unless overridden), then the cluster's."""
    merged: dict[str, str] = {}
    for key, text in gpu.sources.items():
        if key.startswith("efficiency."):
            if key.removeprefix("efficiency.") not in overrides:
                merged[key] = text
        else:
            merged[f"gpu.{key}"] = text
    merged.update(cluster_sources)
    return merged


def _default_sources(stated: Mapping[str, Any]) -> dict[str, str]:
    """Citations of the efficiency fields an entry leaves at :class:`EfficiencySpec`'s default: the
    field's own documentation, which names where the default comes from."""
    return {
        f"efficiency.{name}": f"EfficiencySpec default {info.default}: {' '.join((info.description or '').split())}"
        for name, info in EfficiencySpec.model_fields.items()
        if name not in stated and not info.is_required()
    }


def _json_type(value: object) -> str:
    """The JSON name of a parsed value's type (for messages)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")
