"""Activation recomputation per layer, as the plan's ``layer_recompute`` says.

- ``full``: the layer's forward runs under ``torch.utils.checkpoint.checkpoint`` (non-reentrant): only
  its input is kept, everything else is recomputed in backward (Chen et al. 2016; Megatron-LM
  ``--recompute-granularity full``).
- ``selective``: the same checkpoint with a selective policy
  (``torch.utils.checkpoint.create_selective_checkpoint_contexts``): the attention core
  (scaled-dot-product attention, softmax) is recomputed and every other op's output is kept, which
  is Megatron-LM's selective recomputation (Korthikanti et al. 2022, section 5).
- ``none``: plain call.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import torch
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

_aten = torch.ops.aten
_ATTENTION_CORE = {
    op for op in (
        getattr(_aten, name, None) for name in (
            "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
            "scaled_dot_product_attention", "_softmax", "softmax",
        )
    ) if op is not None
}


def _attention_core_policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    """Recompute the attention core, keep everything else."""
    packet = getattr(op, "overloadpacket", op)
    return CheckpointPolicy.PREFER_RECOMPUTE if packet in _ATTENTION_CORE else CheckpointPolicy.PREFER_SAVE


def apply_recompute(module: nn.Module, mode: str) -> None:
    """Run ``module``'s forward under the recomputation ``mode`` (``none``, ``selective``, ``full``).

    The checkpoint goes around the module's own ``forward`` (an instance attribute), not around the
    call: hooks that FSDP2 and DTensor register on the module stay outside the recomputed region, as
    with torchtitan's checkpoint wrapper applied before ``fully_shard``, and parameter names do not
    change.
    """
    if mode == "none":
        return
    if mode not in ("full", "selective"):
        raise ValueError(f"unknown recompute mode {mode!r}")
    module.forward = partial(_checkpointed, module.forward, mode)


def _checkpointed(forward: Callable[..., Any], mode: str, *args: Any, **kwargs: Any) -> Any:
    if not torch.is_grad_enabled():
        return forward(*args, **kwargs)
    if mode == "full":
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)
    context = partial(create_selective_checkpoint_contexts, _attention_core_policy)
    return checkpoint(forward, *args, use_reentrant=False, context_fn=context, **kwargs)
