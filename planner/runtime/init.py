"""Give a runtime's parameters their values: the unsplit model's, then sharded.

``meshplan run --seed S`` builds the unsplit model under ``torch.manual_seed(S)`` on the runtime's
device (:func:`init_device`: the GPU itself where the full fp32 copy fits beside the rank's shards,
so no host copy and no host initialisation; the host otherwise) with the model's own initialisation (:func:`planner.runtime.models.build_model`), so every plan of one model
starts from the same full weights, and :func:`materialize` copies each local shard out of them:
``to_empty`` on the stage modules (torchtitan's meta-device flow), then, per parameter and buffer,
``distribute_tensor(full, mesh, placements, src_data_rank=None)`` (each rank slices its own shard
from its own copy, no communication). Building the full model needs host memory for it on every
rank: this suits models that fit on one host. Under expert parallelism a rank's expert tensors are
its experts' rows of the full ones (:func:`planner.runtime.expert_parallel.expert_slices`).
"""

from __future__ import annotations

from itertools import chain

import torch
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor

from planner.runtime.apply import Runtime
from planner.runtime.stage import ROOT
from planner.runtime.tasks import vocab_size  # noqa: F401  (re-exported: run and the tests read it here)


FULL_COPY_HEADROOM = 1.25
"""The unsplit model is built on the runtime's GPU when its fp32 weights times this factor fit in the
GPU's free memory next to the rank's own (already allocated) shards; the rest is the caching
allocator's rounding and the largest layer's init temporaries."""


def init_device(runtime: Runtime, params: int) -> torch.device:
    """Where the unsplit model of ``params`` fp32 parameters is initialised: the runtime's own device (CUDA
    included: no host copy, GPU initialisation kernels) when it fits there, else the host."""
    if runtime.device.type != "cuda":
        return runtime.device
    free, _ = torch.cuda.mem_get_info(runtime.device)
    return runtime.device if params * 4 * FULL_COPY_HEADROOM < free else torch.device("cpu")


def synthetic_tokens(seed: int, step: int, batch: int, seq_len: int, vocab: int) -> torch.Tensor:
    """Token ids (batch, seq_len + 1) of training step ``step``, from ``seed`` only."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    return torch.randint(0, vocab, (batch, seq_len + 1), generator=gen)


@torch.no_grad()
def materialize(runtime: Runtime, full: nn.Module) -> None:
    """Allocate ``runtime``'s stage modules on its device and fill them from the unsplit ``full``."""
    from planner.runtime.expert_parallel import expert_slices

    state = dict(chain(full.named_parameters(remove_duplicate=False), full.named_buffers(remove_duplicate=False)))
    for stage in runtime.stages:
        stage.to_empty(device=runtime.device)
        rows = expert_slices(stage, ROOT)
        for name, tensor in chain(stage.named_parameters(), stage.named_buffers()):
            key = name.removeprefix(ROOT)
            src = state[key][rows[key]] if key in rows else state[key]
            src = src.detach().to(runtime.device)
            if isinstance(tensor, DTensor):
                shard = distribute_tensor(src, tensor.device_mesh, tensor.placements, src_data_rank=None)
                tensor.to_local().copy_(shard.to_local())
            else:
                tensor.copy_(src)
