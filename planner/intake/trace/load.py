"""Get a module and its example inputs onto the meta device: factories, live modules, HF configs.

Factory contract (DESIGN.md): ``factory()`` returns an ``nn.Module``, or ``(module, make_inputs)``
where ``make_inputs(micro_batch, seq_len)`` builds example inputs: a tensor, a tuple of positional
inputs, or a dict of keyword inputs. Without ``make_inputs`` the input is int64 token ids of shape
(micro_batch, seq_len). Factories run under ``torch.device("meta")``, so parameters take no memory;
a module that still holds real tensors is replaced by a meta replica (no data copied).
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn
from torch.utils import _pytree as pytree

from planner.errors import InputError

MakeInputs = Callable[[int, int], Any]


def token_ids(micro_batch: int, seq_len: int) -> torch.Tensor:
    """The default example input: int64 token ids of shape (micro_batch, seq_len), on meta."""
    return torch.zeros((micro_batch, seq_len), dtype=torch.int64, device="meta")


def split_inputs(value: Any) -> tuple[tuple, dict]:
    """``make_inputs``' result as (args, kwargs)."""
    if isinstance(value, dict):
        return (), dict(value)
    if isinstance(value, (tuple, list)):
        return tuple(value), {}
    return (value,), {}


def example_inputs(make_inputs: MakeInputs | None, micro_batch: int, seq_len: int) -> tuple[tuple, dict, bool]:
    """(args, kwargs, is_sequence) on meta. ``is_sequence``: some input's shape follows ``seq_len``
    (checked by building the inputs at twice the length); otherwise the model sees whole samples."""
    if make_inputs is None:
        return (token_ids(micro_batch, seq_len),), {}, True
    try:
        with torch.device("meta"):
            args, kwargs = split_inputs(make_inputs(micro_batch, seq_len))
            longer = split_inputs(make_inputs(micro_batch, 2 * seq_len))
    except Exception as exc:
        raise InputError(f"make_inputs({micro_batch}, {seq_len}) raised {type(exc).__name__}: {exc}") from exc
    args, kwargs = pytree.tree_map_only(torch.Tensor, _to_meta, (args, kwargs))
    shapes = [tuple(t.shape) for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    shapes2 = [tuple(t.shape) for t in pytree.tree_leaves(longer) if isinstance(t, torch.Tensor)]
    if not shapes:
        raise InputError("make_inputs returned no tensor; return a tensor, a tuple or a dict of tensors")
    return args, kwargs, shapes != shapes2


def sequence_flags(make_inputs: MakeInputs | None, micro_batch: int, seq_len: int) -> list[bool] | None:
    """Per tensor input of ``make_inputs``, whether its shape follows ``seq_len`` (built on meta at
    that length and twice it); None when every input does or there is no ``make_inputs``. A speech
    encoder-decoder's features keep their length while its decoder ids follow ``seq_len``."""
    if make_inputs is None:
        return None
    try:
        with torch.device("meta"):
            one = pytree.tree_leaves(split_inputs(make_inputs(micro_batch, seq_len)))
            two = pytree.tree_leaves(split_inputs(make_inputs(micro_batch, 2 * seq_len)))
    except Exception:  # example_inputs ran it already and reports its failures
        return None
    pairs = [(a, b) for a, b in zip(one, two) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)]
    flags = [a.shape != b.shape for a, b in pairs]
    return flags if any(flags) and not all(flags) else None


def index_values(make_inputs: MakeInputs | None, micro_batch: int, seq_len: int, args: tuple,
                 kwargs: dict, max_elements: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(traced input, real value) of each integer or boolean input ``make_inputs`` builds on CPU (a
    graph's ``edge_index``): the values data-dependent ops on indices read
    (:func:`planner.intake.trace.routing.resolve`). ``make_inputs`` runs once more, off meta; inputs it
    builds on meta (token ids), floating-point inputs and those over ``max_elements`` get none."""
    if make_inputs is None:
        return []
    try:
        real = pytree.tree_leaves(split_inputs(make_inputs(micro_batch, seq_len)))
    except Exception:  # it ran on meta already; a CPU build is only a help
        return []
    traced = pytree.tree_leaves((args, kwargs))
    if len(real) != len(traced):
        return []
    return [(t, r) for t, r in zip(traced, real) if isinstance(r, torch.Tensor) and isinstance(t, torch.Tensor)
            and r.device.type == "cpu" and not r.is_floating_point() and not r.is_complex()
            and r.shape == t.shape and r.numel() <= max_elements]


def _to_meta(t: torch.Tensor) -> torch.Tensor:
    return t if t.device.type == "meta" else torch.empty_like(t, device="meta")


def meta_replica(module: nn.Module) -> nn.Module:
    """``module`` itself when it lives on meta, else a copy whose parameters and buffers are empty meta
    tensors (ties kept; no data copied)."""
    tensors = list(module.parameters()) + list(module.buffers())
    if all(t.device.type == "meta" for t in tensors):
        return module
    memo: dict[int, Any] = {}
    for p in module.parameters():
        memo[id(p)] = nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
    for b in module.buffers():
        memo.setdefault(id(b), torch.empty_like(b, device="meta"))
    return copy.deepcopy(module, memo)


def _import_target(target: str, arg: str) -> Any:
    try:
        if target.endswith(".py"):
            path = Path(target).resolve()
            if not path.is_file():
                raise InputError(f"model factory file {target} not found (from {arg!r}); check the path")
            name = f"meshplan_factory_{abs(hash(str(path)))}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            sys.modules[name] = module
            spec.loader.exec_module(module)  # type: ignore[union-attr]
            return module
        return importlib.import_module(target)
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"cannot import {target} (from {arg!r}): {type(exc).__name__}: {exc}") from exc


def load_factory(arg: str) -> tuple[nn.Module, MakeInputs | None]:
    """Import and call ``path/to/file.py:factory`` or ``package.module:factory`` on the meta device."""
    target, sep, attr = arg.rpartition(":")
    if not sep or not target or not attr.isidentifier():
        raise InputError(f"model factory {arg!r} must look like path/to/file.py:factory or package.module:factory")
    factory = getattr(_import_target(target, arg), attr, None)
    if not callable(factory):
        raise InputError(f"{target} has no callable {attr!r} (from {arg!r}); name a function returning an nn.Module")
    try:
        with torch.device("meta"):
            result = factory()
    except Exception as exc:
        raise InputError(f"model factory {arg!r} raised {type(exc).__name__}: {exc}") from exc
    return unpack_factory_result(result, arg)


def unpack_factory_result(result: Any, label: str) -> tuple[nn.Module, MakeInputs | None]:
    """A factory's ``module`` or ``(module, make_inputs)``, checked."""
    make_inputs = None
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], nn.Module):
        result, make_inputs = result
        if not callable(make_inputs):
            raise InputError(f"{label}: the second item returned must be make_inputs(micro_batch, seq_len)")
    if not isinstance(result, nn.Module):
        raise InputError(f"{label} returned {type(result).__name__}, not an nn.Module (or (module, make_inputs))")
    return meta_replica(result), make_inputs


def hf_model(path: str) -> tuple[nn.Module, MakeInputs | None, str]:
    """Build the ``transformers`` model a ``config.json`` describes, on meta (no weights, no hub).

    The class is the config's first ``architectures`` entry when transformers has it, else the
    causal-LM, sequence-to-sequence or base auto class. KV caching is off and attention uses SDPA.
    Returns (module, make_inputs, model name).
    """
    try:
        import transformers
    except ImportError as exc:
        raise InputError("--trace of a config.json needs transformers: pip install 'meshplan[hf]'") from exc
    from planner.intake.jsonio import read_json  # regular files only, size cap, no NaN, bounded nesting

    file = Path(path)
    file = file / "config.json" if file.is_dir() else file
    raw = read_json(file, f"model config {file}", "fix the file or pass a preset")
    if not isinstance(raw, dict):
        raise InputError(f"model config {file} holds a JSON {type(raw).__name__}, not an object; fix the file")
    try:
        config = transformers.AutoConfig.for_model(**raw)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cannot read {file} as a Hugging Face config: {exc}") from exc
    config.use_cache = False
    try:
        model_cls = _hf_class(transformers, raw, config)
        with torch.device("meta"):
            module = _build_hf(model_cls, config)
    except InputError:
        raise
    except Exception as exc:  # ImportError of an optional dependency included: bad input, not a crash
        raise InputError(f"transformers cannot build {file}: {type(exc).__name__}: {_first_line(exc)}") from exc
    make_inputs = _seq2seq_inputs if getattr(config, "is_encoder_decoder", False) else None
    if getattr(module, "main_input_name", None) == "input_features" and getattr(config, "num_mel_bins", None):
        make_inputs = _speech_inputs(config)
    if isinstance(getattr(config, "image_size", None), int) and getattr(config, "vocab_size", None) is None:
        make_inputs = _image_inputs(config.image_size, getattr(config, "num_channels", 3))
    return module, make_inputs, raw.get("_name_or_path") or file.parent.name or file.stem


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _build_hf(model_cls: Any, config: Any) -> nn.Module:
    """The model on the current device, experts looped in eager code (transformers 5
    ``experts_implementation``): each expert is a plain matmul the trace measures under representative
    routing (:mod:`planner.intake.trace.routing`), not an opaque grouped kernel or a per-token weight gather.

    Attention is SDPA, whose call the trace takes whole, where the class supports it; a class with
    ``_supports_sdpa = False`` (gpt-oss, whose attention sinks SDPA lacks; Mamba, which has no
    attention and which transformers refuses to build with an attention setting) is built with its
    own default attention (eager: matmuls and a softmax, counted in full)."""
    build = model_cls.from_config if hasattr(model_cls, "from_config") else model_cls._from_config
    attention = {} if getattr(model_cls, "_supports_sdpa", True) is False else {"attn_implementation": "sdpa"}
    try:
        return build(config, **attention, experts_implementation="eager")
    except TypeError:  # transformers 4: no experts_implementation
        return build(config, **attention)


def _hf_class(transformers: Any, raw: dict, config: Any) -> Any:
    for name in raw.get("architectures") or ():
        cls = getattr(transformers, name, None)
        if cls is not None:
            return cls
    auto = ("AutoModelForSeq2SeqLM",) if getattr(config, "is_encoder_decoder", False) else ()
    for name in (*auto, "AutoModelForCausalLM", "AutoModel"):
        cls = getattr(transformers, name)
        if type(config) in cls._model_mapping:
            return cls
    raise InputError(f"transformers has no model class for model_type {raw.get('model_type')!r}")


def _seq2seq_inputs(micro_batch: int, seq_len: int) -> dict[str, torch.Tensor]:
    """Encoder and decoder token ids of the same length (an encoder-decoder's example input)."""
    return {"input_ids": token_ids(micro_batch, seq_len), "decoder_input_ids": token_ids(micro_batch, seq_len)}


def _speech_inputs(config: Any) -> MakeInputs:
    """A speech encoder-decoder's example input (Whisper, ``WhisperEncoder.forward``): log-mel
    features of the fixed length the encoder expects (``max_source_positions`` frames after its
    stride-2 convolution: 3,000 mel frames, 30 s, for 1,500 encoder positions) and ``seq_len``
    decoder tokens; ``--seq-len`` counts decoder tokens."""
    frames = 2 * int(config.max_source_positions)
    mels = int(config.num_mel_bins)
    return lambda micro_batch, seq_len: {"input_features": torch.zeros((micro_batch, mels, frames), device="meta"),
                                         "decoder_input_ids": token_ids(micro_batch, seq_len)}


def _image_inputs(size: int, channels: int) -> MakeInputs:
    """Pixel values of one ``size`` x ``size`` image per sample (a vision model's example input)."""
    return lambda micro_batch, seq_len: torch.zeros((micro_batch, channels, size, size), device="meta")
