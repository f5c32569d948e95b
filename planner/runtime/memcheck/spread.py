"""The distribution of ``check-memory``'s error over many plans, per kind of pipeline rank: what
``bench/memory_oracle.py`` and ``bench/differential.py`` print and the README quotes.

The error of one rank kind is ``predicted / measured - 1`` of the allocated peak (torch's tracker
against ``costmodel.rank_memory.rank_allocated_bytes``: negative means under-predicted, the case that
runs out of memory). The acceptance band of issue 31 is +10 % / -3 % for every rank kind.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

OVER, UNDER = 0.10, 0.03
"""The acceptance band: at most 10 % over, at most 3 % under."""


@dataclass(frozen=True)
class Checked:
    """One measured rank kind of one plan."""

    case: str
    pp_rank: int
    pp: int
    measured_gib: float
    predicted_gib: float

    @property
    def error(self) -> float:
        return self.predicted_gib / self.measured_gib - 1 if self.measured_gib else 0.0

    @property
    def kind(self) -> str:
        """``whole model`` without pipelining, else ``first stage``, ``middle stage`` or ``last stage``."""
        if self.pp == 1:
            return "whole model"
        return "first stage" if self.pp_rank == 0 else "last stage" if self.pp_rank == self.pp - 1 else "middle stage"

    @property
    def within(self) -> bool:
        return -UNDER <= self.error <= OVER


def spread_lines(rows: list[Checked]) -> list[str]:
    """One line per rank kind and one for all: count, min / median / max error, the worst over and
    the worst under with their case, and how many are outside the band."""
    groups: dict[str, list[Checked]] = {}
    for row in rows:
        groups.setdefault(row.kind, []).append(row)
    lines = [_line(kind, group) for kind, group in sorted(groups.items())]
    return lines + [_line("all rank kinds", rows)] if rows else ["no rank measured"]


def _line(label: str, rows: list[Checked]) -> str:
    errors = [r.error for r in rows]
    over = max(rows, key=lambda r: r.error)
    under = min(rows, key=lambda r: r.error)
    outside = sum(not r.within for r in rows)
    return (f"{label}: {len(rows)} measured, error min {min(errors):+.1%} / median {statistics.median(errors):+.1%} / "
            f"max {max(errors):+.1%}; worst over {over.error:+.1%} ({over.case}, rank {over.pp_rank}), worst under "
            f"{under.error:+.1%} ({under.case}, rank {under.pp_rank}); {outside} outside +{OVER:.0%} / -{UNDER:.0%}")
