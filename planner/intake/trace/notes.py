"""What a trace's estimate must say about it: the notes naming generic layers and why.

Split from :mod:`planner.intake.trace.build`, which calls :func:`trace_notes` once per trace.
"""

from __future__ import annotations

from typing import Any

from planner.intake.trace.stubs import OPAQUE
from planner.intake.trace.types import LayerTrace

OPAQUE_FLOPS_PER_PARAM = 2.0
"""Forward FLOPs per parameter per token of a block that neither ran nor was recognised: every weight
used once in a multiply-add (exact for dense matmul layers; an upper bound for experts)."""


def pattern(path: str) -> str:
    """``model.layers.7`` -> ``model.layers.*``: one name for a repeat group (equal layers hash equal)."""
    return ".".join("*" if part.isdigit() else part for part in path.split("."))


def trace_notes(why: dict[str, str], recognised: dict[str, Any], traces: list[LayerTrace]) -> list[str]:
    """What the estimate must say about the generic layers of a trace: the blocks that were not
    recognised and why (``why``: pattern name -> reason), the blocks that could not run, the other layers
    costed from their ops, and the expert blocks (``recognised``: unit -> (layer, surplus) or a reason)."""
    notes, counts = [], {}
    for t in traces:
        if t.kind == "generic" and t.modules:
            key = pattern(t.name) if pattern(t.name) in why else t.name  # unique blocks of a named pattern
            counts[key] = counts.get(key, 0) + 1
    opaque = {t.name for t in traces if t.kind == "generic" and t.stub_of == OPAQUE}
    for name, reason in why.items():
        how = (f"could not run without data, costed at {OPAQUE_FLOPS_PER_PARAM:g} FLOPs per parameter per "
               "token" if name in opaque else "costed from its traced ops")
        notes.append(f"traced block {name} (x{counts.get(name, 1)}) planned as a generic layer: {reason}; {how}")
    rest = [f"{n} (x{c})" if c > 1 else n for n, c in counts.items() if n not in why]
    if rest:
        shown = ", ".join(rest[:8]) + (f" and {len(rest) - 8} more" if len(rest) > 8 else "")
        notes.append(f"traced layers planned as generic (not transformer blocks; costed from their traced ops): {shown}")
    moe = sorted({f[0].name for f in recognised.values() if not isinstance(f, str) and f[0].is_moe})
    if moe:
        notes.append(f"traced expert blocks {', '.join(moe)}: run under balanced representative routing, "
                     "FLOPs as top-k experts per token")
    return notes
