"""Out of memory is an answer: a CUDA out-of-memory error in ``run``, ``check-memory`` or ``profile``
becomes :class:`RankOutOfMemory` (CLI exit 3, the code of "no plan fits") with one line: the rank,
what it had allocated, what the plan predicted for it and which flag would help.

torch raises ``torch.OutOfMemoryError`` (``torch.cuda.OutOfMemoryError`` is the same class, a
``RuntimeError``) when the caching allocator cannot map a block even after freeing its cache
(c10/cuda/CUDACachingAllocator.cpp); its message ends with "Of the allocated memory X GiB is
allocated by PyTorch", which :func:`allocated_gib` reads when the device cannot be asked.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from planner.errors import NoFeasiblePlanError

GIB = float(1 << 30)
_ALLOCATED = re.compile(r"Of the allocated memory ([0-9.]+) (GiB|MiB|KiB|B)")
_UNITS = {"GiB": 1.0, "MiB": 1 / 1024, "KiB": 1 / 1024**2, "B": 1 / 1024**3}


class RankOutOfMemory(NoFeasiblePlanError):
    """A rank ran out of device memory (exit 3); the message is the one line :func:`oom_line` writes."""


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` is torch's out-of-memory error (torch not imported: never)."""
    torch = sys.modules.get("torch")
    kind = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    return kind is not None and isinstance(exc, kind)


def allocated_gib(exc: BaseException) -> float | None:
    """GiB the failing process had allocated: torch's own figure in the message, else
    ``torch.cuda.memory_allocated`` when CUDA is initialised, else None."""
    found = _ALLOCATED.search(str(exc))
    if found:
        return float(found.group(1)) * _UNITS[found.group(2)]
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.memory_allocated() / GIB
    return None


def plan_rank_prediction(plan: Any, rank: int) -> float | None:
    """The plan's predicted peak GiB for global ``rank`` (its pipeline rank's stage figure;
    global rank = tp + tp (cp + cp (dp + dp pp)), ``planner.runtime.mesh``), or the plan's peak."""
    m = plan.mesh
    pp_rank = rank // max(1, m.tp * m.cp * m.dp)
    figures = [s.memory_gib for s in plan.stages if s.pp_rank == pp_rank]
    return max(figures) if figures else plan.estimate.peak_memory_gib


def suggestions(plan: Any | None, allocated: float | None, predicted: float | None) -> list[str]:
    """The flags of ``meshplan plan`` / ``estimate`` that would help, most direct first: a headroom
    of the missed amount (rounded up, at least 1 GiB), a heavier recompute mode, a smaller micro-batch."""
    short = max(1, int(-(-(allocated - predicted) // 1)) + 1) if allocated is not None and predicted is not None else 2
    flags = [f"--memory-headroom {short}"]
    if plan is not None:
        modes = {r for s in plan.stages for r in s.layer_recompute} or {"none"}
        if modes != {"full"}:
            flags.append("--recompute selective" if modes == {"none"} else "--recompute full")
        if plan.schedule.micro_batch > 1:
            flags.append(f"--micro-batch {plan.schedule.micro_batch // 2}")
    else:
        flags.append("--recompute full")
    return flags


def oom_line(where: str, rank: int | None, exc: BaseException, plan: Any | None = None,
             predicted: float | None = None, capacity: float | None = None, flags: list[str] | None = None) -> str:
    """The one line: ``where`` (run / check-memory / profile) ran out of memory on ``rank`` with
    what it had allocated, the plan's prediction, and ``flags`` (default: :func:`suggestions`)."""
    alloc = allocated_gib(exc)
    who = f"rank {rank}" if rank is not None else "a rank"
    had = f"{alloc:.1f} GiB allocated" if alloc is not None else "an unknown amount allocated"
    said = f" where the plan predicted {predicted:.1f} GiB" if predicted is not None else ""
    cap = f" of {capacity:.1f}" if capacity is not None and predicted is not None else ""
    flags = flags or suggestions(plan, alloc, predicted)
    verb = "re-plan with" if plan is not None or predicted is not None else "rerun with"
    return (f"{where}: {who} ran out of GPU memory with {had}{said}{cap}; {verb} "
            f"{flags[0]}" + (f" (or {', or '.join(flags[1:])})" if flags[1:] else ""))


@contextmanager
def oom_answered(where: str, rank: int | None, plan: Any | None = None, predicted: float | None = None,
                 flags: list[str] | None = None) -> Iterator[None]:
    """Turn torch's out-of-memory error inside the block into :class:`RankOutOfMemory` (its line:
    :func:`oom_line`)."""
    try:
        yield
    except BaseException as exc:
        if not is_oom(exc):
            raise
        capacity = plan.estimate.memory_capacity_gib if plan is not None else None
        raise RankOutOfMemory(oom_line(where, rank, exc, plan, predicted, capacity, flags)) from None
