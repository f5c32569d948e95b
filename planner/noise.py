"""Third-party notices known to be harmless, silenced in this one place (``MESHPLAN_DEBUG=1`` keeps them).

``run``, ``check-memory`` and ``profile`` import torch, torchao (through transformers) and
transformers, whose import-time and first-use notices a user reads as failures. Each entry below
names what it hides and why it is harmless; errors of every library still show, and every other
warning is left alone.
"""

from __future__ import annotations

import logging
import os
import warnings

QUIET_LOGGERS: dict[str, str] = {
    "torchao": "'Failed to load ..._C_mxfp8 / _C_cutlass_90a .so': optional CUDA kernels absent on this machine",
    "torch.utils._pytree": "'... is an Enum subclass ... register_constant() ... deprecated': torchao's pytree registrations",
    "transformers": "'Model config: bos_token_id must be ... within the vocabulary': small test vocabularies; "
                    "and transformers' first-use notices",
    "torch.distributed.pipelining": "schedule logs; a failed action still raises and meshplan reports it in one line",
}
"""Logger name -> what it prints that is harmless here; their level becomes ERROR."""

QUIET_WARNINGS: tuple[tuple[str, str], ...] = (
    (r".*FSDP.*|.*fully_shard.*|.*reshard_after_forward.*", "torch.distributed.fsdp"),
    (r".*", "torch.distributed.tensor"),
    (r".*", "torch.distributed._tools"),
    (r".*torch.utils.checkpoint.*use_reentrant.*", ""),
)
"""(message regex, module regex) of ``UserWarning``s FSDP2, DTensor and the memory tracker raise on
every fake-tensor step (check-memory) and on plain CPU runs: advice on settings the plan chose."""


def silence_third_party() -> None:
    """Silence :data:`QUIET_LOGGERS` and :data:`QUIET_WARNINGS`, unless ``MESHPLAN_DEBUG`` is set."""
    if os.environ.get("MESHPLAN_DEBUG"):
        return
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # read when transformers configures its logger
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    for message, module in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=UserWarning, module=module)
    warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed")
