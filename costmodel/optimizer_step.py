"""What a rank holds during the AdamW update, the step's last memory phase. Under the fused update
the runtime runs it is never the peak: the end of a backward (``costmodel.rank_phases.peak_phase``)
holds the same fp32 parameters, gradients and Adam states plus what the backward still holds
(``tests/costmodel/test_optimizer_step.py`` checks this over seeded configurations), so the cost model
prices no separate phase for it.

The native runtime (``planner.runtime.apply.default_optimizer``) runs ``torch.optim.AdamW`` fused
on CUDA (``torch._fused_adamw_``, torch 2.13: one kernel updates parameters, m and v in place, no
temporary). The multi-tensor (``foreach``) implementation, which the runtime runs on CPU, would add
``torch._foreach_sqrt``'s fp32 temporary per parameter (4 B, ``torch.optim.adam._multi_tensor_adam``;
measured with torch's tracker before check-memory stepped the fused optimizer).
During the update the rank holds, per local parameter (FSDP2 mixed precision, ``planner.runtime.fsdp``:
every ZeRO level keeps fp32 parameters, gradients and Adam states; the bf16 parameters gathered for
compute are freed by the end of the backward): the fp32 parameter (4 B), its fp32 gradient (4 B),
Adam's m and v (8 B), sharded over the data-parallel ranks from
ZeRO 1 (ZeRO 1 runs as ZeRO 2) and whole at ZeRO 0 (HSDP with one shard per replica).
Measured with torch's ``FSDPMemTracker`` (``meshplan check-memory``, which steps ``AdamW(fused=True)``
under the tracker).
"""

from __future__ import annotations

from costmodel.engines import EngineTerms
from costmodel.ranks import RankSums
from costmodel.specs import ParallelConfig

ADAMW_STEP_BYTES = (4, 4, 8, 0)
"""(parameters, gradients, optimizer states, temporary) bytes per sharded parameter during the
fused AdamW update: the fp32 master parameter, its fp32 gradient, Adam's m and v, no temporary
(``torch._fused_adamw_``; the foreach path's ``_foreach_sqrt`` would add 4)."""


def optimizer_step_bytes(cfg: ParallelConfig, t: RankSums, terms: EngineTerms) -> dict[str, float] | None:
    """Bytes per category (``params``, ``grads``, ``optimizer_states``, ``activations``, ``buffers``)
    a pipeline rank holding ``t`` allocates during the native runtime's AdamW update (see the module
    docstring), or None where the engine is not the native runtime's or the optimizer lives on the host.
    Activations and communication buffers are freed by then (the backward has run for every
    micro-batch and FSDP2 has resharded every unit); the update's temporary is booked under
    ``buffers`` (a transient, not optimizer state: ZeRO k+1 never holds more optimizer state than
    ZeRO k)."""
    if terms.engine != "native" or cfg.offload_optimizer:
        return None
    dense = t.params - t.expert_params
    dense_shard = cfg.dp * cfg.cp if cfg.zero >= 1 else 1
    expert_shard = max(1, cfg.dp * cfg.cp // cfg.ep) if cfg.zero >= 1 else 1
    local = dense / dense_shard + t.expert_params / expert_shard
    p, g, o, temp = (local * b for b in ADAMW_STEP_BYTES)
    return {"params": p, "grads": g, "optimizer_states": o, "activations": 0.0, "buffers": temp}
