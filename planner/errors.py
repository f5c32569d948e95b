"""The two exceptions the planner API raises for the caller's input; the CLI maps them to exit codes."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input: a message of one line that says what is wrong and how to fix it (CLI exit 2).

    Several problems found together are joined into the one line with ``"; "``.
    """

    def __init__(self, *problems: str) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("; ".join(problems))


class NoFeasiblePlanError(RuntimeError):
    """No configuration fits in memory (CLI exit 3); the message names the nearest miss and a fix."""

    def __init__(self, message: str, shortfall_gib: float | None = None) -> None:
        self.shortfall_gib = shortfall_gib
        super().__init__(message)
