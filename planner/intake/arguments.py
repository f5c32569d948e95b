"""Resolve the user's model and cluster arguments into specs, turning every failure into InputError."""

from __future__ import annotations

import math
import os
from typing import Any

from costmodel.specs import ClusterSpec, ModelSpec
from planner.errors import InputError
from planner.intake.limits import MAX_LAYERS, MAX_PARAMS, MAX_PER_TOKEN, MAX_SIZE


def resolve_model_arg(model: Any, trace: bool = False) -> ModelSpec:
    """A ``ModelSpec``, a preset name / config.json path / ``file.py:factory`` string, or an
    ``nn.Module`` (traced on the meta device). With ``trace``, a config.json builds the Hugging Face
    model on the meta device and traces it instead of reading the config's numbers.

    A factory that calls ``sys.exit`` is an :class:`InputError`, and so is a model with no layers,
    no parameters or sizes no machine could hold (:func:`model_problems`)."""
    try:
        spec = _resolve_model(model, trace)
    except SystemExit as exc:
        raise InputError(f"the model code called sys.exit({exc.code!r:.40}) instead of returning a module; fix the factory") from None
    except RecursionError:
        raise InputError("the model nests too deeply to be read (RecursionError); check the model or its config") from None
    problems = model_problems(spec)
    if problems:
        raise InputError(f"model {spec.name!r:.60}: {problems[0]}", *problems[1:])
    return spec


def utf8_problem(text: str, what: str) -> str | None:
    """Why ``text`` cannot be stored in a plan: it holds bytes that are not UTF-8 (a path from a
    file system whose names are not UTF-8 arrives with lone surrogates, which JSON cannot carry)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return f"{what} '{shown:.80}' is not valid UTF-8 (at character {err.start}); rename the file or folder to a UTF-8 name"
    return None


def _resolve_model(model: Any, trace: bool) -> ModelSpec:
    if isinstance(model, str) and (problem := utf8_problem(model, "model")):
        raise InputError(problem)
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, str) and trace:
        if not model.endswith(".json"):
            raise InputError(f"--trace applies to a Hugging Face config.json, not {model!r:.80}; drop --trace")
        _precheck_traced_config(model)
        from planner.intake.trace import model_from_hf_config  # torch and transformers past this point

        return model_from_hf_config(model)
    if isinstance(model, str):
        from planner.intake.models import resolve_model

        return resolve_model(model)
    if hasattr(model, "named_parameters"):
        from planner.intake.trace import model_from_module

        return model_from_module(model)
    raise InputError(f"model must be a preset name, a config.json path, a factory 'file.py:fn' or an nn.Module, not {type(model).__name__}")



def _precheck_traced_config(path: str) -> None:
    """Refuse a config.json that ``--trace`` could not build, before torch and transformers load: not a
    regular file, too large, not a JSON object, NaN, or sizes that are not positive integers."""
    from planner.intake.jsonio import read_json
    from planner.intake.limits import config_size_problems

    what = f"model config {path!r:.80}"
    raw = read_json(path, what, "fix the file")
    if not isinstance(raw, dict):
        raise InputError(f"{what} holds a JSON {type(raw).__name__}, not an object; fix the file")
    problems = config_size_problems(raw)
    if problems:
        raise InputError(f"{what}: {problems[0]}", *problems[1:])


def model_problems(spec: ModelSpec) -> list[str]:
    """Why ``spec`` cannot be planned: no layers, no parameters and no work, or sizes beyond any
    machine (a hidden size of 10^200 from a config.json would overflow the cost model)."""
    from costmodel.params import layer_params

    if not spec.layers:
        return ["has no layers with parameters or work (nothing to train or split); check that the factory returns the model itself"]
    if len(spec.layers) > MAX_LAYERS:
        return [f"has {len(spec.layers):,} layers, more than the {MAX_LAYERS:,} meshplan plans"]
    out = []
    for i, layer in enumerate(spec.layers):
        for field, value in layer.model_dump().items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if isinstance(value, float) and (not math.isfinite(value) or value > MAX_PER_TOKEN):
                out.append(f"layer {i} ({layer.name}) has {field} = {value!r}, beyond any model (at most {MAX_PER_TOKEN:g})")
            elif isinstance(value, int) and value > (MAX_PARAMS if field == "params" else MAX_SIZE):
                limit = 50 if field == "params" else 31
                out.append(f"layer {i} ({layer.name}) has {field} of about 2^{value.bit_length() - 1}, beyond any model (at most 2^{limit})")
        if len(out) >= 3:
            break
    if out:
        return out
    if sum(layer_params(x) for x in spec.layers) == 0:
        return ["has no parameters, so there is nothing to train or split; check that the factory returns the model"]
    return []


def resolve_cluster_arg(cluster: Any) -> ClusterSpec:
    """A ``ClusterSpec``, or a preset name / cluster JSON path."""
    if isinstance(cluster, ClusterSpec):
        spec = cluster
    elif isinstance(cluster, (str, os.PathLike)):
        from planner.intake.jsonio import check_file

        if problem := utf8_problem(os.fspath(cluster) if not isinstance(cluster, bytes) else "", "cluster"):
            raise InputError(problem)
        from profiles import ProfileError, load_cluster

        check_file(cluster, f"cluster file {str(cluster)!r:.60}")
        try:
            spec = load_cluster(cluster)
        except ProfileError as err:
            raise InputError(str(err)) from None
        except RecursionError:
            raise InputError(f"cluster file {cluster!r:.60} nests too deeply to be a cluster file; fix the file") from None
    else:
        raise InputError(f"cluster must be a preset name, a cluster JSON path or a ClusterSpec, not {type(cluster).__name__}")
    bad = nonfinite_fields(spec)
    if bad:
        raise InputError(f"cluster {spec.name!r:.60} has {bad[0]} = {_value_at(spec, bad[0])}; every number must be finite: fix the cluster file")
    return spec


def nonfinite_fields(spec: Any) -> list[str]:
    """Dotted paths of the infinite or NaN numbers in a pydantic spec (JSON cannot carry them)."""
    out: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            out.append(path)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else str(key))
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")

    walk(spec.model_dump(), "")
    return out


def _value_at(spec: Any, path: str) -> str:
    import re

    value: Any = spec.model_dump()
    for part in re.findall(r"[^.\[\]]+", path):
        value = value[int(part)] if isinstance(value, (list, tuple)) else value[part]
    return repr(value)


MAX_GPUS = 2**20
"""Most GPUs a plan or an estimate may ask for (1,048,576: ten times the largest published cluster);
larger counts are typing mistakes, and a search over them would not return."""
MAX_COUNT = 2**40
"""Most sequences per batch or tokens per sequence accepted (far beyond any training run)."""


def count_problems(**counts: Any) -> list[str]:
    """A clause for every argument that is not a positive integer within bounds (``bool`` and
    integer-valued strings are refused too: the API takes ``gpus=8``, not ``True`` or ``'8'``);
    ``gpus`` is bounded by :data:`MAX_GPUS`, the rest by :data:`MAX_COUNT`."""
    out = []
    for name, value in counts.items():
        flag = name.replace("_", "-")
        most = MAX_GPUS if name == "gpus" else MAX_COUNT
        if not isinstance(value, int) or isinstance(value, bool):
            out.append(f"{flag} must be a positive integer, not {type(value).__name__} {value!r:.40}")
        elif not 0 < value <= most:
            out.append(f"{flag} must be a positive integer of at most {most:,} (got about 2^{value.bit_length() - 1})" if value > most
                       else f"{flag} must be a positive integer (got {value})")
    return out


def number_problem(name: str, value: Any, *, zero_ok: bool, unit: str, most: float = 1e9) -> list[str]:
    """A clause when ``value`` is not a real number above 0 (at least 0 with ``zero_ok``) and at
    most ``most``."""
    flag = name.replace("_", "-")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return [f"{flag} must be a number of {unit}, not {type(value).__name__} {value!r:.40}"]
    if (isinstance(value, float) and not math.isfinite(value)) or value < 0 or (value == 0 and not zero_ok) or value > most:
        shown = f"{value!r}" if isinstance(value, float) or abs(value) < 10**12 else f"about 2^{value.bit_length() - 1}"
        return [f"{flag} must be a finite {'non-negative' if zero_ok else 'positive'} number of {unit}, at most {most:g} (got {shown})"]
    return []
