"""The entry point's exit under torchrun (``cli._leave_torchrun_rank``): a finished rank leaves with
its exit code and its output flushed, skipping the interpreter's teardown; elsewhere it returns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ("import sys; sys.path.insert(0, {root!r}); import torch.distributed, cli; print('done', end=''); "
          "sys.stderr.write('note'); cli._leave_torchrun_rank(3); print(' and returned', end='')")


def _child(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(root=str(ROOT))], capture_output=True, text=True,
                          timeout=120, env=env, check=False)


def test_a_torchrun_rank_leaves_with_its_code_and_its_output_flushed() -> None:
    done = _child({**os.environ, "TORCHELASTIC_RUN_ID": "test"})
    assert (done.returncode, done.stdout, done.stderr) == (3, "done", "note")


def test_outside_torchrun_the_command_returns_as_usual() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TORCHELASTIC_RUN_ID"}
    done = _child(env)
    assert (done.returncode, done.stdout) == (0, "done and returned")
