"""Estimation: one parallel configuration's step time and memory (``estimate``, ``planner.estimate``),
the engine knobs it reads (``knobs``) and the result it returns (``result``, part of the plan JSON)."""
