"""Capacity planning: the best plan for every point of a grid of clusters, GPU counts, batches and
sequence lengths, and what training on a token budget costs with each (time, GPU-hours, money,
energy), with the smallest GPU count per cluster that meets a deadline.

``planner.sweep.sweep(...)`` (also ``planner.sweep(...)``) runs it; ``meshplan sweep`` is its command
line. Modules: ``grid`` (parsing), ``batch`` (McCandlish et al. 2018), ``economics`` (time, cost,
energy), ``runner`` / ``ray_backend`` (executing the searches), ``assemble`` (points from outcomes),
``result`` (the JSON / CSV schema), ``report`` (the HTML page).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from planner.sweep.api import SweepRun, sweep
from planner.sweep.result import SweepPoint, SweepResult

__all__ = ["SweepPoint", "SweepResult", "SweepRun", "sweep"]


class _CallableModule(types.ModuleType):
    """``planner.sweep(...)`` keeps working once this package is imported: importing it rebinds the
    ``planner.sweep`` attribute from the API function to the package, so the package calls the same."""

    def __call__(self, **kwargs: Any) -> SweepRun:
        return sweep(**kwargs)


sys.modules[__name__].__class__ = _CallableModule
