"""The free text a plan carries: every string of a plan (names, paths, sources, notes, keys) must be one
printable line of bounded length.

Names travel from a plan into engine launchers (a comment of Megatron-LM's ``launch.sh``, of the
torchtitan module) and reports, so a name holding a line break could end a comment and start a
command. The exports quote what they write as well (``planner.outputs.export``); this check is the
validator's half: such a plan is refused by ``meshplan validate`` and by every command that reads it.
"""

from __future__ import annotations

from typing import Any

MAX_NAME = 256
"""Longest name (of the model, the cluster, its GPU, a layer): real names are under 100 characters."""
MAX_TEXT = 4096
"""Longest other string (a path, a source, a note): the longest path Linux accepts (PATH_MAX)."""
_NAME_KEYS = frozenset({"name", "layer_names", "cluster_name"})
"""Keys whose strings are names, held to :data:`MAX_NAME`."""


def text_problem(text: str, where: str, most: int = MAX_TEXT) -> str | None:
    """Why ``text`` cannot be a plan's free text (a line break or any non-printable character, a lone
    surrogate from a path that is not UTF-8, or over ``most`` characters), or None when it can."""
    if len(text) > most:
        return f"{where} is {len(text):,} characters long (at most {most:,}); regenerate the plan"
    if not text.isprintable():
        bad = next(ch for ch in text if not ch.isprintable())
        kind = "a line break" if bad in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029" else f"the non-printable character {ascii(bad)}"
        return f"{where} holds {kind} ({ascii(text)[:60]}): a plan's text must be one printable line; regenerate the plan"
    return None


def text_problems(data: Any, path: str = "", limit: int = 3) -> list[str]:
    """A clause for each string in ``data`` (a plan's ``model_dump()``, keys included) that
    :func:`text_problem` refuses, the first ``limit`` of them, each named by its dotted path."""
    out: list[str] = []
    stack: list[tuple[Any, str, int]] = [(data, path, MAX_TEXT)]
    while stack and len(out) < limit:
        value, where, most = stack.pop()
        if isinstance(value, str):
            problem = text_problem(value, where or "the plan", most)
            if problem:
                out.append(problem)
        elif isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                child = f"{where}.{key}" if where and isinstance(key, str) else str(key)
                if isinstance(key, str) and (problem := text_problem(key, f"a key of {where or 'the plan'}", MAX_NAME)):
                    out.append(problem)
                stack.append((item, child, MAX_NAME if key in _NAME_KEYS else MAX_TEXT))
        elif isinstance(value, (list, tuple)):
            stack += [(item, f"{where}[{i}]", most) for i, item in reversed(list(enumerate(value)))]
    return out[:limit]
