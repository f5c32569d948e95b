"""torch's memory tracker as the cost model's oracle, at real sizes (``planner.runtime.memcheck_cases``).

Each case applies a real-size plan on torch's fake process group of the plan's world size, runs one
training step under FSDPMemTracker on fake tensors, and requires the cost model's per-rank
prediction (GPU-only terms removed) to be within 10 % of the measurement and never below it by more
than 3 %. ``bench/memory_oracle.py`` prints every case, including those outside the band.

BUDGET: about 20 s on 2 cores (Llama 3.1 70B on 64 ranks, three shallow depths).
"""

from __future__ import annotations

import pytest

from planner.runtime.memcheck import check_memory
from planner.runtime.memcheck_cases import CASES, case_plan

WITHIN, UNDER = 0.10, 0.03
IN_CI = ("llama70b-fsdp64-zero3",)
"""The cases inside the band today; the others, and why they miss, are in bench/memory_oracle.py's
table and planner/runtime/memcheck_cases.py."""


@pytest.mark.parametrize("name", IN_CI)
def test_prediction_within_10_percent_never_3_percent_under(name: str) -> None:
    case = next(c for c in CASES if c.name == name)
    result = check_memory(case_plan(case))
    for rank in result.ranks:
        assert rank.measured_peak_gib > 1.0
        assert -UNDER <= rank.error <= WITHIN, (name, rank.pp_rank, rank.measured_peak_gib, rank.predicted_peak_gib)
