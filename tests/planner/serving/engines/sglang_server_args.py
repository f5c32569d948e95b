"""Run SGLang's own ``prepare_server_args`` and ``ServerArgs.check_server_args`` on an exported argv, on CPU.

``sglang/srt/server_args.py`` (``ServerArgs``: the argparse definitions in ``add_cli_args``, the
defaults ``__post_init__`` derives, and the checks of ``check_server_args``) comes unchanged from
the registry's sglang 0.4.10 wheel, the release the export writes for (``wheel.py``), with its
``reasoning_parser.py`` (the ``--reasoning-parser`` choices). SGLang itself cannot be installed
beside the pinned CPU torch (its wheel requires its own torch build). The modules ``server_args``
imports are stood in for, only while it loads and runs:

- ``sglang.srt.utils`` (imports the CUDA runtime): its constants and plain helpers
  (``nullable_str``, ``is_valid_ipv6_address``, ``is_remote_url``, ``is_port_available``, the LoRA
  module lists) are taken from the real file by ``picked.pick``; the device queries answer as on the
  plan's GPU: ``get_device`` "cuda", ``get_device_memory_capacity`` the GPU's memory in MiB,
  ``is_hip`` False, ``is_flashinfer_available`` True (SGLang's CUDA install ships FlashInfer).
- ``sglang.srt.hf_transformers_utils``: ``check_gguf_file`` False (the model is a Hugging Face
  folder); ``get_config`` (it downloads the model's config) answers the model's Hugging Face
  ``architectures``, given by the caller (``check_server_args`` reads it: Llama 4 needs FA3).
- ``sglang.srt.lora.lora_registry``: ``LoRARef`` raises if built (only ``--lora-paths`` builds it,
  never exported).
- ``sglang.srt.configs.model_config``: ``ModelConfig.from_server_args`` (it reads the model's
  Hugging Face config) answers a text model (``is_multimodal`` False): every exported model
  (Llama, Qwen, DeepSeek presets) is one, and only multimodal models change the memory fraction.

No check of ``__post_init__`` or ``check_server_args`` is replaced or skipped. The router of a
disaggregated deployment (``python -m sglang.srt.disaggregation.mini_lb``, whose ``__main__`` runs
``launch_lb.main``) is read by ``launch_lb.py``'s ``LBArgs`` (its parser and ``from_cli_args``),
which imports nothing but the standard library (:func:`router_args`).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any
from unittest import mock

from tests.planner.serving.engines.picked import pick
from tests.planner.serving.engines.wheel import Wheel

WHEEL = Wheel(dist="sglang", version="0.4.10", filename="sglang-0.4.10-py3-none-any.whl",
              sha256="93b4eaca8f2815477e3a4005639cda095f24f1f7435b5898a62acb48c327bf2b",
              members=("sglang/srt/server_args.py", "sglang/srt/reasoning_parser.py", "sglang/srt/utils.py",
                       "sglang/srt/disaggregation/launch_lb.py"))
UTILS = ("nullable_str", "is_valid_ipv6_address", "is_remote_url", "is_port_available",
         "SUPPORTED_LORA_TARGET_MODULES", "LORA_TARGET_ALL_MODULES")


def _never(*_: Any, **__: Any) -> Any:
    raise RuntimeError("not available in the argument check (it would load a model or a LoRA adapter)")


def _package(name: str, path: Path | None = None) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = [str(path)] if path else []
    return module


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def server_args(argv: list[str], gpu_memory_mib: float, architecture: str) -> Any:
    """SGLang's ``ServerArgs`` for ``argv`` (the words after ``python -m sglang.launch_server``), after
    ``check_server_args``, on a GPU of ``gpu_memory_mib`` and a model whose Hugging Face config names
    ``architecture``; raises what SGLang raises (``SystemExit`` from argparse for an unknown flag
    or a bad value, ``AssertionError`` / ``ValueError`` from its checks)."""
    root = WHEEL.root() / "sglang" / "srt"
    utils = pick(root / "utils.py", UTILS, "sglang.srt.utils")
    utils.get_device = lambda *_: "cuda"
    utils.get_device_memory_capacity = lambda *_: gpu_memory_mib
    utils.is_hip = lambda: False
    utils.is_flashinfer_available = lambda: True
    utils.configure_ipv6 = _never
    hf = types.ModuleType("sglang.srt.hf_transformers_utils")
    hf.check_gguf_file = lambda *_: False
    hf.get_config = lambda *_, **__: types.SimpleNamespace(architectures=[architecture])
    lora = types.ModuleType("sglang.srt.lora.lora_registry")
    lora.LoRARef = _never
    configs = types.ModuleType("sglang.srt.configs.model_config")
    configs.ModelConfig = types.SimpleNamespace(from_server_args=lambda *_: types.SimpleNamespace(is_multimodal=False))
    modules = {"sglang": _package("sglang"), "sglang.srt.configs": _package("sglang.srt.configs"),
               "sglang.srt.configs.model_config": configs, "sglang.srt": _package("sglang.srt", root), "sglang.srt.utils": utils,
               "sglang.srt.hf_transformers_utils": hf, "sglang.srt.lora": _package("sglang.srt.lora"),
               "sglang.srt.lora.lora_registry": lora}
    with mock.patch.dict(sys.modules, modules):
        _load("sglang.srt.reasoning_parser", root / "reasoning_parser.py")
        module = _load("sglang.srt.server_args", root / "server_args.py")
        args = module.prepare_server_args(list(argv))
        args.check_server_args()
    return args


def router_args(argv: list[str]) -> Any:
    """SGLang's ``LBArgs`` for the router's ``argv`` (the words after ``python -m
    sglang.srt.disaggregation.mini_lb``), built as ``launch_lb.main`` builds it."""
    import argparse

    spec = importlib.util.spec_from_file_location("sglang_launch_lb", WHEEL.root() / "sglang" / "srt" / "disaggregation" / "launch_lb.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    parser = argparse.ArgumentParser()
    module.LBArgs.add_cli_args(parser)
    return module.LBArgs.from_cli_args(parser.parse_args(list(argv)))
