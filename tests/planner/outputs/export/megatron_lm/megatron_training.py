"""Run Megatron-LM's own ``parse_args`` / ``validate_args`` on an exported argv, on CPU.

``megatron/training`` comes unchanged from the registry's megatron-core 0.17.0 wheel, fetched and
checked at test time (``wheel.py`` beside this module: nothing of Megatron-LM is kept in the
repository), the release right after the megatron-core 0.16.1 the test extra pins. It runs against
that installed megatron-core 0.16.1 with these shims, each applied only while the parser runs:

- ``megatron.training`` is a bare package (its real ``__init__`` imports the trainer, data and
  logging stack); ``get_args`` / ``get_timers`` / ``get_adlr_autoresume``, which ``utils.py``
  imports for training-time helpers only, raise if called.
- ``get_device_arch_version`` (``torch.cuda`` on a GPU) returns the plan's GPU generation
  (9 for Hopper): the validation branches that read it run as on that GPU.
- ``megatron.core.utils.is_flashinfer_min_version`` (new in 0.17) answers False, as 0.17 does
  when FlashInfer is not installed.
- Transformer Engine (CUDA only, not installable here) provides the fused RoPE kernel that
  Megatron-LM turns on by default (``apply_rope_fusion``, which ``TransformerConfig`` checks is
  importable): ``rope_utils.fused_apply_rotary_pos_emb`` is a stand-in that raises if called.
- Hybrid (Mamba) layer patterns: 0.17's ``Symbols.PIPE`` / ``MTP_SEPARATOR`` are given their
  0.17 values; the pattern parsers (absent from 0.16.1) raise if called: only hybrid models
  (``--hybrid-layer-pattern``, never exported) reach them.
- The 18 ``TransformerConfig`` fields added in 0.17 (0.17 derives their flags from the dataclass,
  so 0.16.1's lacks them) are added through ``parse_args``'s own ``extra_args_provider`` hook
  with 0.17's defaults (:data:`FIELDS_NEW_IN_0_17`); the export sets none of them.

No check of ``validate_args`` is replaced or skipped: the shims only stand in for hardware
queries and for code that GPT exports never reach.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import types
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

FIELDS_NEW_IN_0_17: dict[str, Any] = {
    "cpu_offloading_retain_pinned_cpu_buffers": False, "fused_residual_rmsnorm": False,
    "inference_disable_triton_nvls_kernels": False, "inference_grouped_gemm_backend": "auto",
    "inference_moe_disable_fused_quant_kernels": False, "mla_down_proj_fusion": False,
    "moe_pad_experts_for_cuda_graph_inference": False, "moe_router_force_biased": None,
    "mtp_hybrid_override_pattern": None, "mtp_use_repeated_layer": False, "mup_attn_scale_power": 1.0,
    "mup_base_head_dim": None, "mup_base_hidden_size": None, "mup_embedding_mult": 1.0,
    "mup_output_mult": 1.0, "mup_width_mult": 1.0, "nccl_all_reduce_for_prefill": False, "use_mup": False,
}
"""``TransformerConfig`` / ``MLATransformerConfig`` fields of megatron-core 0.17.0 missing from
0.16.1, with their 0.17.0 defaults (megatron/core/transformer/transformer_config.py)."""
GPU_ARCH = {"h100": 9, "h200": 9, "a100": 8, "b200": 10, "gb200": 10}
"""CUDA compute capability major of a GPU name (NVIDIA's CUDA GPU table)."""


def _runtime_only(*_: Any, **__: Any) -> Any:
    raise RuntimeError("training-time helper of megatron.training, not available in the argument check")


def _te_only(*_: Any, **__: Any) -> Any:
    raise RuntimeError("Transformer Engine's fused RoPE kernel runs on the GPU host only")


def _hybrid_only(*_: Any, **__: Any) -> Any:
    raise NotImplementedError("hybrid layer patterns need megatron-core 0.17's parser; no export uses them")


def arguments_module(root: Path) -> types.ModuleType:
    """``megatron.training.arguments`` from the fetched files under ``root`` (imported once)."""
    if "megatron.training.arguments" in sys.modules:
        return sys.modules["megatron.training.arguments"]
    import megatron
    import megatron.core.utils as core_utils

    package = types.ModuleType("megatron.training")
    package.__path__ = [str(root / "megatron" / "training")]  # type: ignore[attr-defined]
    package.get_args = package.get_timers = package.get_adlr_autoresume = _runtime_only  # type: ignore[attr-defined]
    sys.modules["megatron.training"] = package
    megatron.training = package  # type: ignore[attr-defined]
    with mock.patch.object(core_utils, "is_flashinfer_min_version", lambda _v: False, create=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module("megatron.training.arguments")


def _new_fields(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``extra_args_provider``: the 0.17-only config fields with their defaults."""
    group = parser.add_argument_group("megatron-core 0.17 config fields absent from 0.16.1")
    for name, default in FIELDS_NEW_IN_0_17.items():
        flag = "--" + name.replace("_", "-")
        if flag not in parser._option_string_actions:
            group.add_argument(flag, default=default)
    return parser


@contextlib.contextmanager
def _shims(arch: int, root: Path) -> Iterator[types.ModuleType]:
    import megatron.core.models.common.embeddings.rope_utils as rope
    import megatron.core.ssm.mamba_hybrid_layer_allocation as hybrid
    import megatron.core.utils as core_utils

    module = arguments_module(root)
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(module, "get_device_arch_version", lambda: arch))
        stack.enter_context(mock.patch.object(module, "is_flashinfer_min_version", lambda _v: False))
        stack.enter_context(mock.patch.object(core_utils, "is_flashinfer_min_version", lambda _v: False, create=True))
        stack.enter_context(mock.patch.object(rope, "fused_apply_rotary_pos_emb", _te_only))
        for name, value in (("PIPE", "|"), ("MTP_SEPARATOR", "/")):
            stack.enter_context(mock.patch.object(hybrid.Symbols, name, value, create=True))
        for name in ("parse_hybrid_pattern", "get_hybrid_total_layer_count", "get_hybrid_total_pipeline_segment_count"):
            stack.enter_context(mock.patch.object(hybrid, name, _hybrid_only, create=True))
        yield module


def megatron_args(root: Path, argv: list[str], world_size: int, env: dict[str, str], gpu: str) -> tuple[argparse.Namespace, Any]:
    """Megatron-LM's arguments after ``parse_args`` (``sys.argv`` = ``pretrain_gpt.py`` + ``argv``,
    ``WORLD_SIZE`` / ``RANK`` and ``env`` set) and ``validate_args``, with the
    ``TransformerConfig`` of ``core_transformer_config_from_args``; ``root`` holds the fetched
    ``megatron/training``."""
    arch = next((v for k, v in GPU_ARCH.items() if k in gpu.lower()), None)
    assert arch is not None, f"no CUDA architecture known for GPU {gpu!r}"
    environ = {"WORLD_SIZE": str(world_size), "RANK": "0", "LOCAL_RANK": "0", **env}
    with _shims(arch, root) as module, mock.patch.object(sys, "argv", ["pretrain_gpt.py", *argv]), \
            mock.patch.dict(os.environ, environ), warnings.catch_warnings(), \
            contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        args = module.parse_args(_new_fields)
        module.validate_args(args)
        config = module.core_transformer_config_from_args(args)
    return args, config
