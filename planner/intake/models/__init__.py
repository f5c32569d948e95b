"""Model intake: turn the ``--model`` argument into a :class:`~costmodel.specs.ModelSpec`.

``M`` is a preset name (case-insensitive, see :func:`list_presets`), a path to a Hugging Face
``config.json`` (or to the folder holding one), or ``path/to/file.py:factory`` /
``package.module:factory`` returning a ``torch.nn.Module``. Factories are handed to
:func:`planner.intake.trace.model_from_factory`, imported only then, so presets and config files never
import torch.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
from pathlib import Path
from typing import Any

from costmodel.specs import EmbeddingLayer, ModelSpec, TransformerLayer
from planner.errors import InputError
from planner.intake.models.hf_config import load_hf_config
from costmodel.params import count_active_params, count_params, layer_params
from planner.intake.models.presets import HF_PRESETS, PRESETS, build_preset, list_presets

__all__ = [
    "resolve_model",
    "names_factory",
    "list_presets",
    "model_summary",
    "count_params",
    "count_active_params",
    "layer_params",
]

_LIST_HINT = "(meshplan list models)"
# ``path/to/file.py:factory`` or ``package.module:factory`` (a drive letter like ``C:\`` is no match).
_FACTORY = re.compile(r"^(?P<target>.+\.py|[A-Za-z_][\w.]*):(?P<attr>[A-Za-z_]\w*)$")


def _check_factory_target(arg: str, target: str) -> None:
    """Fail early, without importing anything heavy, when the factory's file or module is missing."""
    if target.endswith(".py"):
        if not Path(target).is_file():
            raise InputError(f"model factory file {target} not found (from {arg!r}); check the path")
        return
    try:
        found = importlib.util.find_spec(target) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise InputError(
            f"model factory module {target!r} cannot be imported (from {arg!r}); "
            "check the name and PYTHONPATH, or pass path/to/file.py:factory"
        )


def _unknown_model(arg: str) -> InputError:
    """An error naming the closest preset names (difflib), or the three kinds of ``--model``."""
    close = difflib.get_close_matches(arg.lower(), [*PRESETS, *HF_PRESETS], n=3, cutoff=0.6)
    if close:
        options = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
        return InputError(f"unknown model {arg!r}; did you mean {options}? {_LIST_HINT}")
    return InputError(
        f"unknown model {arg!r}; pass a preset {_LIST_HINT}, a config.json path "
        "or path/to/file.py:factory"
    )


def names_factory(arg: str) -> bool:
    """Whether ``resolve_model(arg)`` would import and run code (``file.py:fn`` / ``module:fn``) rather
    than read a preset or a config file: what a model named in a data file may not do unasked."""
    text = arg.strip()
    if text.lower() in PRESETS or text.lower() in HF_PRESETS:
        return False
    try:
        exists = Path(text).exists()
    except (OSError, ValueError):
        exists = False
    return bool(_FACTORY.match(text)) and not exists


def resolve_model(arg: str) -> ModelSpec:
    """Resolve ``--model``: a preset name, a ``config.json`` path, or a ``module:factory`` reference.

    Raises :class:`planner.errors.InputError` (one line) for an unknown name, an unreadable or
    invalid config, or a factory whose file or module does not exist.
    """
    text = arg.strip()
    key = text.lower()
    if key in PRESETS or key in HF_PRESETS:
        return build_preset(key)
    path = Path(text)
    if path.suffix == ".json" or (path.is_dir() and (path / "config.json").is_file()):
        return load_hf_config(path)
    match = _FACTORY.match(text)
    if match and not path.exists():
        _check_factory_target(text, match["target"])
        from planner.intake.trace import model_from_factory  # torch only past this point

        return model_from_factory(text)
    if path.suffix == ".py":
        raise InputError(
            f"model {text!r} names no factory; pass {text}:<function returning an nn.Module>"
        )
    if path.is_file():
        return load_hf_config(path)
    raise _unknown_model(text)


def model_summary(spec: ModelSpec) -> dict[str, Any]:
    """One flat dict describing a model for tables and reports (sizes of its first block).

    Keys: ``name``, ``layers`` (transformer blocks), ``hidden_size``, ``num_heads``,
    ``num_kv_heads``, ``ffn_hidden_size``, ``vocab_size``, ``num_experts``, ``moe_top_k``,
    ``total_params``, ``active_params``, ``max_seq_len``, ``source``. Block fields are None for a
    model without transformer blocks (a traced CNN).
    """
    blocks = [layer for layer in spec.layers if isinstance(layer, TransformerLayer)]
    first = blocks[0] if blocks else None
    embeddings = [layer for layer in spec.layers if isinstance(layer, EmbeddingLayer)]
    return {
        "name": spec.name,
        "layers": len(blocks),
        "hidden_size": first.hidden_size if first else None,
        "num_heads": first.num_heads if first else None,
        "num_kv_heads": first.num_kv_heads if first else None,
        "ffn_hidden_size": first.ffn_hidden_size if first else None,
        "vocab_size": embeddings[0].vocab_size if embeddings else None,
        "num_experts": max((b.num_experts for b in blocks), default=0),
        "moe_top_k": max((b.moe_top_k for b in blocks), default=0),
        "total_params": count_params(spec),
        "active_params": count_active_params(spec),
        "max_seq_len": spec.max_seq_len,
        "source": spec.source,
    }
