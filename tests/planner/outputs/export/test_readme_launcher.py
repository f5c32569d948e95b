"""The README's "Launching Megatron-LM from Python" example runs and passes the exported arguments."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import planner

README = Path(__file__).resolve().parents[4] / "README.md"


def launcher_example() -> str:
    section = README.read_text().split("## Launching Megatron-LM from Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)  # type: ignore[union-attr]


def test_example_is_ten_lines() -> None:
    assert len(launcher_example().strip().splitlines()) <= 10


def test_example_starts_pretrain_gpt_with_the_plans_arguments(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append((cmd, kw)))
    monkeypatch.setenv("NODE_RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "node0")
    scope: dict = {}
    exec(compile(launcher_example(), str(README), "exec"), scope)
    (cmd, kw), = calls
    plan = scope["plan"]
    assert cmd[0] == "torchrun" and f"--nnodes={plan.mesh.nodes}" in cmd
    script = cmd.index("pretrain_gpt.py")
    assert cmd[script + 1: script + 1 + len(planner.export(plan, "megatron").argv())] == planner.export(plan, "megatron").argv()
    assert kw["check"] is True
