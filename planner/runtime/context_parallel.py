"""Context parallelism (``torch.distributed.tensor.experimental.context_parallel``): refused for now.

PyTorch's context parallelism shards the sequence of every attention call over the ``cp`` mesh
dimension with ring attention over SDPA's flash / efficient / cuDNN kernels, which exist on CUDA
only: on any other device a plan with ``cp > 1`` is refused with one line naming the device. On CUDA
the runtime would also have to shard every position-dependent buffer with the tokens (the rotary
positions Hugging Face decoders compute inside ``forward``) and average gradients over ``dp x cp``;
until it does, ``cp > 1`` is refused there too rather than run with wrong positions.
"""

from __future__ import annotations

from planner.errors import InputError


def check_context_parallel(cp: int, device_type: str) -> None:
    """InputError when ``cp > 1`` cannot run on ``device_type``."""
    if cp <= 1:
        return
    if device_type != "cuda":
        raise InputError(f"context parallelism (cp {cp}) needs CUDA SDPA kernels; device {device_type!r} has none: "
                         "plan with --cp 1 or run on cuda")
    raise InputError(f"context parallelism (cp {cp}) is not wired into the native runtime yet (rotary positions are "
                     "not sharded with the tokens); plan with --cp 1")
