"""Activation recomputation per layer, as the plan's ``layer_recompute`` says.

- ``full``: the layer's forward runs under ``torch.utils.checkpoint.checkpoint`` (non-reentrant): only
  its input is kept, everything else is recomputed in backward (Chen et al. 2016; Megatron-LM
  ``--recompute-granularity full``).
- ``selective``: the same checkpoint with torchtitan's op-level selective policy
  (``_custom_policy`` in ``torchtitan/models/llama3/infra/parallelize.py``, through
  ``torch.utils.checkpoint.create_selective_checkpoint_contexts``): the outputs of the attention
  core (the SDPA kernels) and of every other matmul (the 1st, 3rd, ... ``mm`` / ``addmm`` of the
  layer) must be saved, every other op is recomputed. This is what the cost model's torchtitan
  engine counts (``costmodel.activations.block_activation_bytes``, ``TORCHTITAN_SAC_SAVED_MM``).
  Keeping every op's output instead (the closest to Megatron-LM's selective recomputation,
  Korthikanti et al. 2022, section 5) is unsound in eager PyTorch: composite ops mutate their own
  temporaries in place (``rms_norm`` computes ``mean(x^2).add_(eps)``), so a cached output changes
  after it is saved and torch refuses it in backward ("Tensor cached during selective activation
  checkpoint has been mutated").
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
        )
    ) if op is not None
}
"""SDPA kernels: their outputs (attention output, log-sum-exp) are saved (torchtitan's ``_save_list``)."""
_MATMULS = {_aten.mm, _aten.addmm}
"""Projections: every other one's output is saved (torchtitan saves ``aten.mm``; biased layers run ``addmm``)."""


def _op_level_policy(counts: dict[str, int], ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    """torchtitan's ``_custom_policy``: save SDPA and the odd-numbered matmuls, recompute the rest.

    ``counts`` numbers the matmuls separately in forward and in recomputation, so both passes make
    the same decisions (the recomputation must replay the forward's choices)."""
    packet = getattr(op, "overloadpacket", op)
    if packet in _ATTENTION_CORE:
        return CheckpointPolicy.MUST_SAVE
    if packet in _MATMULS:
        key = "recompute" if ctx.is_recompute else "forward"
        counts[key] = counts.get(key, 0) + 1
        if counts[key] % 2 == 1:
            return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def _selective_contexts() -> Any:
    """Fresh checkpoint contexts (and matmul counts) for one call of a layer."""
    return create_selective_checkpoint_contexts(partial(_op_level_policy, {}))


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
    return checkpoint(forward, *args, use_reentrant=False, context_fn=_selective_contexts, **kwargs)
