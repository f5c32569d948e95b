"""Pipeline parallelism with ``torch.distributed.pipelining``.

Stage ``k`` (chunk k of the plan, in chunk order) runs on pipeline rank ``k mod pp``
(Megatron-LM's interleaved layout, which is the "loop" placement torch's interleaved schedules
expect). Each local chunk becomes a ``PipelineStage``; the schedule is the one the plan names:

- ``gpipe``: ``ScheduleGPipe`` (Huang et al. 2019);
- ``1f1b``: ``Schedule1F1B`` (Narayanan et al. 2021, PipeDream-Flush);
- ``interleaved-1f1b``: ``ScheduleInterleaved1F1B`` with ``virtual_stages`` chunks per rank
  (Narayanan et al. 2021, section 2.2);
- ``zb-h1``: ``ScheduleInterleavedZeroBubble`` (Qi et al. 2023, zero-bubble with split weight
  gradients), on the rank's chunks.

With fewer micro-batches than pipeline stages, 1F1B's warm-up already holds every micro-batch
before the first backward, so its order is GPipe's; ``Schedule1F1B`` refuses such counts, and
``ScheduleGPipe`` runs them (same order, same memory). ``zb-h1`` with tensor parallelism and the
remainder rules of torch's interleaved schedules are native rules instead
(:mod:`planner.plans.target_rules`): the search never proposes them.

The schedules scale gradients by 1 / micro-batches (``scale_grads=True``), so a loss that is the mean
over a micro-batch gives the gradient of the mean over the batch.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.pipelining import (
    PipelineStage,
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble,
)

from planner.runtime.stage import StageModule


def local_chunks(pp: int, vpp: int, pp_rank: int) -> list[int]:
    """Chunk indices on pipeline rank ``pp_rank``: pp_rank, pp_rank + pp, ..."""
    return [pp_rank + v * pp for v in range(vpp)]


def build_schedule(name: str, stages: list[StageModule], chunks: list[int], num_chunks: int, pp_mesh: DeviceMesh,
                   device: torch.device, n_microbatches: int, loss_fn: Callable[..., torch.Tensor]) -> Any:
    """The plan's schedule over this rank's ``stages`` (chunk indices ``chunks``)."""
    group = pp_mesh.get_group()
    pipe = [PipelineStage(stage, k, num_chunks, device, group=group) for stage, k in zip(stages, chunks)]
    if name == "gpipe" and len(pipe) == 1:
        return ScheduleGPipe(pipe[0], n_microbatches, loss_fn=loss_fn)
    if name == "1f1b" and len(pipe) == 1 and n_microbatches < num_chunks:
        return ScheduleGPipe(pipe[0], n_microbatches, loss_fn=loss_fn)  # 1F1B's order when all micro-batches warm up
    if name == "1f1b" and len(pipe) == 1:
        return Schedule1F1B(pipe[0], n_microbatches, loss_fn=loss_fn)
    if name == "zb-h1":
        return ScheduleInterleavedZeroBubble(pipe, n_microbatches, loss_fn=loss_fn)
    return ScheduleInterleaved1F1B(pipe, n_microbatches, loss_fn=loss_fn)
