"""The native target's rules: what the native runtime (``planner.runtime``) cannot run, each named.

The validator (:mod:`planner.plans.target_rules`) and the constraint checks
(:mod:`planner.plans.constraints`) refuse with these lines; ``search.targets`` keeps the search
inside the same rules (``TargetRules`` fields of ``native`` and ``native_schedule_allowed``). A leaf
module: it imports nothing.
"""

from __future__ import annotations

NATIVE_RULES: dict[str, str] = {
    "native-zb-h1-tp": "torch.distributed.pipelining's zero-bubble schedule cannot run the input-gradient backward of the vocab-parallel loss; use zb-h1 with tp 1, or another schedule",
    "native-zb-h1-selective": "torch.distributed.pipelining's zero-bubble schedule runs two backwards through each layer (input, then weight gradients), which selective activation checkpointing refuses; recompute none or full with zb-h1",
    "native-zb-h1-rounds": "torch's ScheduleInterleavedZeroBubble needs the micro-batches a multiple of its rounds, max(1, micro-batches // pp)",
}
"""The native target's rules: what the runtime cannot run. ``search.targets`` keeps the search inside them."""


def native_rule(name: str, detail: str) -> str:
    """The validator's line for native rule ``name`` with this plan's ``detail``."""
    return f"native rule {name}: {NATIVE_RULES[name]} ({detail})"
