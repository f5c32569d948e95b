"""The one exception the hardware loaders raise; the planner turns it into its own input error."""

from __future__ import annotations


class ProfileError(ValueError):
    """A GPU or cluster profile could not be loaded.

    The message is one line: which preset, file or field is wrong, and how to fix it (for an unknown
    preset: the nearest names and ``meshplan list clusters``). ``profiles`` does not import
    ``planner``; the planner catches this and re-raises it as ``planner.errors.InputError``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
