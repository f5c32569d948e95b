"""The model a plan names, rebuilt without running anything the plan names unasked: its layer list or
preset (:func:`plan_model`), the model ``meshplan run`` / ``check-memory`` build modules from
(:func:`runtime_model`), and the check that a given model is the plan's (:func:`check_same_model`,
by the SHA-256 of its layer list, :func:`spec_digest`)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from costmodel.specs import ModelSpec
from planner.errors import InputError
from planner.intake.arguments import resolve_model_arg
from planner.plans.files import short
from planner.plans.schema import Plan


def spec_digest(model: ModelSpec) -> str:
    """SHA-256 of the model in canonical JSON (sorted keys, no spaces): equal layer lists, equal digests."""
    text = json.dumps(model.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def plan_model(plan: Plan, retrace: bool = False) -> ModelSpec:
    """The model ``plan`` was made for, without running anything the plan names: its ``spec`` (the
    layer list), else its preset by name. A factory or a config.json is rebuilt from ``model.arg``
    only with ``retrace`` (which imports and runs the factory: for plans you trust), and must hash to
    the plan's ``spec_sha256``. Raises :class:`InputError`."""
    info = plan.model
    if retrace:
        model = resolve_model_arg(info.arg, info.trace)
        if info.spec_sha256 is not None and spec_digest(model) != info.spec_sha256:
            raise InputError(f"model {short(info.arg)} rebuilt with --retrace differs from the model the plan was made for; re-plan it")
        return model
    if info.spec is not None:
        model = info.spec
    elif _is_preset(info.arg) and not info.trace:
        model = resolve_model_arg(info.arg)
    else:
        raise InputError(f"the plan names model {short(info.arg)} but carries no layer list; meshplan never runs code a plan names: "
                         "re-plan with this meshplan, or pass --retrace to rebuild it (runs the factory: only for plans you trust)")
    if info.spec_sha256 is not None and spec_digest(model) != info.spec_sha256:
        where = "model.spec was edited" if info.spec is not None else f"preset {info.arg} changed since planning"
        raise InputError(f"the plan's model does not match its spec_sha256 ({where}); re-plan it")
    return model


def runtime_model(plan: Plan, model: Any = None, retrace: bool = False) -> Any:
    """The model argument ``meshplan run`` / ``check-memory`` build torch modules from, never code or
    files the plan names unasked: ``model`` given by the caller (a preset, config.json,
    ``file.py:factory`` or ModelSpec: the caller's own choice), whose layer list must hash to the
    plan's ``spec_sha256``; else, with ``retrace``, the plan's ``model.arg`` (rebuilt and checked the
    same way); else the plan's preset, which names built-in data only. Raises :class:`InputError`."""
    info = plan.model
    if model is None and not retrace and not (_is_preset(info.arg) and not info.trace):
        raise InputError(f"the plan names model {short(info.arg)}, which meshplan does not build from a plan: pass --model M "
                         "(the preset, config.json or file.py:factory you planned with) or --retrace (runs what the plan names: "
                         "only for plans you trust)")
    if model is None:
        plan_model(plan, retrace=retrace)  # the preset or the retraced model hashes to the plan's digest
        return info.arg
    given = model if isinstance(model, ModelSpec) else resolve_model_arg(model, info.trace)
    check_same_model(plan, given, model)
    return model


def check_same_model(plan: Plan, given: ModelSpec, arg: Any) -> None:
    """:class:`InputError` unless ``given`` is the plan's model: the same layer count and parameters,
    and the same layer list (its SHA-256, names and paths aside, equals the plan's ``spec_sha256``)."""
    from costmodel.params import count_params

    info = plan.model
    layers, params = len(given.layers), count_params(given)
    if (layers, params) != (info.num_layers, info.params):
        raise InputError(f"model {given.name!r} has {layers} layers and {params:,} parameters but the plan's model "
                         f"{info.name!r} has {info.num_layers} and {info.params:,}; pass the model the plan was made for ({short(info.arg)})")
    if info.spec_sha256 is None:  # a plan without a digest: the counts are all there is to compare
        return
    ours = plan_model(plan, retrace=False) if info.spec is not None or _is_preset(info.arg) else None
    named = given.model_copy(update={"name": ours.name, "source": ours.source, "notes": ours.notes}) if ours is not None else given
    if spec_digest(named) != info.spec_sha256:
        raise InputError(f"model {short(arg if isinstance(arg, str) else given.name)} has the plan's layer count and parameters but not its "
                         "layers (SHA-256 differs from model.spec_sha256); pass the model the plan was made for")


def _is_preset(arg: str) -> bool:
    from planner.intake.models import PRESETS

    return arg.strip().lower() in PRESETS
