"""The memory headroom of this GPU, measured: what PyTorch's caching allocator reserves beyond what
it hands out over a training step's allocation pattern (``max_memory_reserved - max_memory_allocated``,
torch.cuda memory statistics), as a share of the allocated peak. ``meshplan profile`` writes it into
the cluster file as ``memory_headroom_gib`` (``costmodel.specs.ClusterSpec``): a plan fits only if its
prediction plus that fits.

The pattern is a step of a ``LAYERS``-block model in miniature, sized to a quarter of the free
memory: the forward keeps per block activations of four sizes (the block input, the MLP's 4x
hidden, the attention statistics, the projection outputs); the loss allocates the logits, their fp32
copy and its gradient; the backward frees each block's activations while it allocates the block's
input gradient and keeps its weight gradient (a third size); the optimizer step frees the weight
gradients. Two steps run and the second is measured (the caching allocator's blocks from the first
are reused, as in training). The CUDA caching allocator's rounding and splitting
(c10/cuda/CUDACachingAllocator.cpp: 512-byte rounding, 2 MiB small pool, 20 MiB large segments) set
the figure; a CPU has no caching allocator, so nothing is measured there.
"""

from __future__ import annotations

import torch

LAYERS = 24
"""Blocks of the synthetic step."""
SHARE_OF_FREE = 0.25
"""Share of the device's free memory the synthetic step's peak takes."""
_ACT = (1.0, 4.0, 0.125, 2.0)
"""Activations each block keeps, in units of the block input's size."""
_GRAD, _WEIGHT_GRAD, _LOGITS = 4.0, 1.5, 3.0


def allocator_headroom_fraction(device: torch.device) -> float | None:
    """(reserved - allocated) / allocated at the peak of the synthetic step's second run on a CUDA
    ``device``; None on a CPU (no caching allocator)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info(device)
    per_block = sum(_ACT) + _WEIGHT_GRAD
    unit = int(SHARE_OF_FREE * free / (LAYERS * per_block + 2 * _LOGITS + _GRAD)) // 4 * 4
    _step(device, unit)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    _step(device, unit)
    torch.cuda.synchronize(device)
    allocated = torch.cuda.max_memory_allocated(device)
    reserved = torch.cuda.max_memory_reserved(device)
    torch.cuda.empty_cache()
    return (reserved - allocated) / allocated if allocated else None


def _step(device: torch.device, unit: int) -> None:
    """One synthetic step (the module docstring's pattern) with blocks of ``unit`` bytes."""
    def alloc(scale: float) -> torch.Tensor:
        return torch.empty(max(1, int(scale * unit)), dtype=torch.uint8, device=device)

    held = [[alloc(s) for s in _ACT] for _ in range(LAYERS)]
    logits = alloc(_LOGITS)
    upcast = alloc(2 * _LOGITS)
    del logits
    grad = alloc(2 * _LOGITS)
    del upcast, grad
    weight_grads = []
    for _ in range(LAYERS):
        input_grad = alloc(_GRAD)
        held.pop()
        weight_grads.append(alloc(_WEIGHT_GRAD))
        del input_grad
    del weight_grads
