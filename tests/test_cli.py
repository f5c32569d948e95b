"""The entry point's exit under torchrun (``cli._leave_torchrun_rank``): a rank whose command succeeded
leaves with its output flushed, skipping the interpreter's teardown; a failed command, or any command
outside torchrun, returns as usual (rank 0 must live to print a refusal)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ("import sys; sys.path.insert(0, {root!r}); import torch.distributed, cli; print('done', end=''); "
          "sys.stderr.write('note'); cli._leave_torchrun_rank({code}); print(' and returned', end='')")


def _child(env: dict[str, str], code: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(root=str(ROOT), code=code)], capture_output=True,
                          text=True, timeout=120, env=env, check=False)


def test_a_torchrun_rank_that_succeeded_leaves_with_its_output_flushed() -> None:
    done = _child({**os.environ, "TORCHELASTIC_RUN_ID": "test"}, 0)
    assert (done.returncode, done.stdout, done.stderr) == (0, "done", "note")


def test_a_failed_command_or_one_outside_torchrun_returns_as_usual() -> None:
    assert _child({**os.environ, "TORCHELASTIC_RUN_ID": "test"}, 3).stdout == "done and returned"
    env = {k: v for k, v in os.environ.items() if k != "TORCHELASTIC_RUN_ID"}
    assert _child(env, 0).stdout == "done and returned"
