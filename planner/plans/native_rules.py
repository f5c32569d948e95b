"""The native target's rules: what the native runtime (``planner.runtime``) cannot run, each named.

The validator (:mod:`planner.plans.target_rules`) and the constraint checks
(:mod:`planner.plans.constraints`) refuse with these lines; ``search.targets`` keeps the search
inside the same rules (``TargetRules`` fields of ``native`` and ``native_schedule_allowed``). A leaf
module: it imports nothing.
"""

from __future__ import annotations

NATIVE_RULES: dict[str, str] = {
    "native-zb-h1-selective": "torch.distributed.pipelining's zero-bubble schedule runs two backwards through each layer (input, then weight gradients), and torch's selective activation checkpointing (torch.utils.checkpoint.create_selective_checkpoint_contexts, checked against torch 2.13.0) refuses a second backward through a region ('Trying to backward an extra time'); recompute none or full with zb-h1",
    "native-zb-h1-zero3": "torch.distributed.pipelining's zero-bubble schedule takes a stage's weight gradients in a second pass (stage_backward_weight: autograd.grad with respect to the stage's parameters) after FSDP2 under ZeRO 3 has resharded them (reshard_after_forward), so it finds no path to them and the stage's weights get no gradient (checked against torch 2.13.0: the last stage of a pp 2 GPT-2 ends its step with every gradient None); zero 0-2 with zb-h1",
    "native-zb-h1-rounds": "torch's ScheduleInterleavedZeroBubble needs the micro-batches a multiple of its rounds, max(1, micro-batches // pp) (torch/distributed/pipelining/schedules.py, checked against torch 2.13.0)",
}
"""The native target's rules: what the runtime cannot run. ``search.targets`` keeps the search inside them."""


def native_rule(name: str, detail: str) -> str:
    """The validator's line for native rule ``name`` with this plan's ``detail``."""
    return f"native rule {name}: {NATIVE_RULES[name]} ({detail})"
