"""Context parallelism: ``torch.distributed.tensor.experimental.context_parallel``.

PyTorch's context parallelism shards the sequence of every attention call over the ``cp`` mesh
dimension with ring attention over SDPA's flash / efficient / cuDNN kernels, which exist on CUDA
only. On any other device a plan with ``cp > 1`` is refused with one line naming the device.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from planner.errors import InputError


def check_context_parallel(cp: int, device_type: str) -> None:
    """InputError when ``cp > 1`` cannot run on ``device_type``."""
    if cp > 1 and device_type != "cuda":
        raise InputError(f"context parallelism (cp {cp}) needs CUDA SDPA kernels; device {device_type!r} has none: "
                         "plan with --cp 1 or run on cuda")


def cp_context(cp_mesh: Any, buffers: list[torch.Tensor], seq_dims: list[int]) -> contextlib.AbstractContextManager:
    """The context under which a step's forward and backward run with the sequence sharded."""
    if cp_mesh.size() == 1:
        return contextlib.nullcontext()
    from torch.distributed.tensor.experimental import context_parallel

    return context_parallel(cp_mesh, buffers=buffers, buffer_seq_dims=seq_dims)
