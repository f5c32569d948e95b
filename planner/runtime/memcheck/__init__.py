"""``meshplan check-memory``: a plan's per-GPU memory measured by torch's own tracker on a fake
process group (``check``), the rank it builds (``build``), the step it measures (``step``), depth
extrapolation for deep models (``depth``) and the oracle cases of ``bench/memory_oracle.py`` (``cases``)."""
