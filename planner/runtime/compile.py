"""``torch.compile`` per transformer block, as torchtitan compiles (``apply_compile`` in
``torchtitan/models/llama3/infra/parallelize.py``): each block on its own, after tensor parallelism
and activation checkpointing, before FSDP2, so that FSDP2's hooks stay outside the compiled regions
(``torch._dynamo.config.skip_fsdp_hooks``) and every block reuses one compiled graph.

The block is compiled in place (``nn.Module.compile``: the module keeps its class, its parameter names
and its checkpointed ``forward``; its ``__call__`` runs the compiled call), so the unsplit model's
names, which :mod:`planner.runtime.init` fills and the record reports, do not change.
"""

from __future__ import annotations

from torch import nn

from planner.runtime.stage import StageModule

BACKEND = "inductor"
"""TorchInductor: Triton kernels on CUDA, C++/OpenMP on CPU (the plan's fused elementwise kernels)."""


def compile_blocks(stages: list[StageModule], backend: str | None = None) -> int:
    """Compile every transformer block of ``stages`` in place (``backend``: :data:`BACKEND`); the number
    of blocks compiled."""
    backend = backend or BACKEND
    count = 0
    for stage in stages:
        for unit in stage.units:
            if unit.kind == "block":
                stage.layer(unit).compile(backend=backend)
                count += 1
    return count


def compiled_blocks(module: nn.Module) -> int:
    """Modules under ``module`` whose calls run compiled (``nn.Module.compile`` set their compiled call)."""
    return sum(getattr(m, "_compiled_call_impl", None) is not None for m in module.modules())
