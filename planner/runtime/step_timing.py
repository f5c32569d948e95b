"""What the runtimes of uneven shares share (issue 22): a rank's seconds per step, the loss type, the logits.

:class:`planner.runtime.shares.ShareRuntime` (whole-model replicas) and
:class:`planner.runtime.hetero_pipeline.PipeRuntime` (pipelined replicas) both keep one
:class:`StepTiming` per step, which ``meshplan run`` turns into the run record's ``rank_times``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class StepTiming:
    """One step of one rank, seconds."""

    compute_s: float
    wait_s: float
    """Injected (emulated slowdown) sleep."""
    sync_s: float
    """Gradient all-reduce, including waiting for the slowest rank."""


def logits_of(out: object) -> torch.Tensor:
    """Logits of a forward: the tensor itself, or a Hugging Face output's ``.logits``."""
    return out.logits if hasattr(out, "logits") else out  # type: ignore[return-value, attr-defined]
