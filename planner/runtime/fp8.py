"""Float8 training of the transformer blocks' linear layers through torchao, or a one-line refusal.

A plan in ``precision fp8`` (``meshplan plan --precision fp8``) is priced with the blocks' projections
as FP8 GEMMs and the attention core, the embedding and the output layer in bf16
(``costmodel.precision``). The runtime converts exactly those layers with
``torchao.float8.convert_to_float8_training`` (torchtitan's Float8 converter), before tensor
parallelism and FSDP2 as torchtitan does, with the ``tensorwise`` recipe (dynamic per-tensor scales,
``Float8LinearConfig.from_recipe_name``): the scaling the cost model prices (an extra amax read,
``costmodel.engines``). FP8 GEMMs (``torch._scaled_mm``) need CUDA with compute capability 8.9 or newer
(Ada, Hopper, Blackwell); elsewhere, or without torchao, the run is refused with one line: it is
never silently run in bf16.
"""

from __future__ import annotations

from torch import nn

from planner.errors import InputError

RECIPE = "tensorwise"
"""torchao's Float8 recipe the cost model prices."""
MIN_CAPABILITY = (8, 9)
"""CUDA compute capability of the first GPUs with FP8 tensor cores (Ada Lovelace; Hopper is 9.0)."""


def check_fp8(device_type: str) -> None:
    """InputError (one line) unless this machine trains Float8: CUDA with capability >= 8.9 and torchao."""
    import torch

    if device_type != "cuda" or not torch.cuda.is_available():
        raise InputError("precision fp8: Float8 training needs a CUDA GPU with compute capability 8.9 or newer "
                         f"(this run is on {device_type}); plan with --precision bf16")
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < MIN_CAPABILITY:
        raise InputError(f"precision fp8: {torch.cuda.get_device_name()} has compute capability {major}.{minor}; "
                         "Float8 training needs 8.9 or newer; plan with --precision bf16")
    try:
        import torchao.float8  # noqa: F401
    except ImportError:
        raise InputError("precision fp8: torchao is not installed (pip install torchao); plan with --precision bf16") from None


def convert_blocks(module: nn.Module, block_paths: list[str]) -> int:
    """Swap every ``nn.Linear`` inside the blocks at ``block_paths`` of ``module`` for torchao's
    ``Float8Linear`` (dimensions divisible by 16, as ``torch._scaled_mm`` needs); the number swapped."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    prefixes = tuple(p + "." for p in block_paths)
    swapped: list[str] = []

    def keep(mod: nn.Module, fqn: str) -> bool:
        ok = (isinstance(mod, nn.Linear) and fqn.startswith(prefixes)
              and mod.in_features % 16 == 0 and mod.out_features % 16 == 0)
        if ok:
            swapped.append(fqn)
        return ok

    convert_to_float8_training(module, module_filter_fn=keep, config=Float8LinearConfig.from_recipe_name(RECIPE))
    return len(swapped)
