"""Out of memory is an answer: a CUDA out-of-memory error (torch's allocator failing, mocked on CPU)
in ``run``, ``check-memory`` and ``profile`` ends with exit 3 and one line naming the rank, what it
had allocated, what the plan predicted and the flags that help (``planner.runtime.oom``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from plan_helpers import make_plan, write_llama_config
from planner.cli import main
from planner.runtime.oom import allocated_gib, oom_line, suggestions

TORCH_MESSAGE = ("CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of 139.81 GiB of which "
                 "1.12 GiB is free. Including non-PyTorch memory, this process has 138.68 GiB memory in use. Of the "
                 "allocated memory 138.30 GiB is allocated by PyTorch, and 0.21 GiB is reserved by PyTorch but unallocated.")
"""torch's message as the caching allocator writes it (c10/cuda/CUDACachingAllocator.cpp), here the
Llama 3.1 8B run of the H200 ground truth (issue 31)."""


def _allocator_fails(*_: Any, **__: Any) -> None:
    """The caching allocator's failure, as torch raises it."""
    raise torch.OutOfMemoryError(TORCH_MESSAGE)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("meshplan: error: ")
    return lines[0]


@pytest.fixture
def plan_file(tmp_path: Path) -> tuple[Path, str]:
    config = write_llama_config(tmp_path)
    path = tmp_path / "plan.json"
    path.write_text(make_plan(config, {"micro_batch": 4, "global_batch": 8}).to_json())
    return path, config


def test_run_out_of_memory_exits_3_with_one_line(plan_file: tuple[Path, str], monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
        monkeypatch.delenv(name)  # restored (unset) after the in-process rank sets them
    monkeypatch.setattr("planner.runtime.apply.Runtime.step", _allocator_fails)
    path, config = plan_file
    assert main(["run", str(path), "--model", config, "--steps", "2", "--warmup", "1", "--device", "cpu"]) == 3
    line = _one_line(capsys.readouterr().err)
    assert "run: rank 0 ran out of GPU memory with 138.3 GiB allocated where the plan predicted" in line
    assert "--memory-headroom" in line and "--recompute selective" in line and "--micro-batch 2" in line


def test_check_memory_out_of_memory_exits_3_with_one_line(plan_file: tuple[Path, str], monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr("planner.runtime.memcheck.check._measure_rank", _allocator_fails)
    path, config = plan_file
    assert main(["check-memory", str(path), "--model", config]) == 3
    line = _one_line(capsys.readouterr().err)
    assert "check-memory: rank 0 ran out of GPU memory with 138.3 GiB allocated where the plan predicted" in line


def test_profile_out_of_memory_exits_3_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr("planner.runtime.profile.profile_cluster", _allocator_fails)
    assert main(["profile", "--device", "cpu", "--quick", "-o", str(tmp_path / "c.json")]) == 3
    line = _one_line(capsys.readouterr().err)
    assert "profile: rank 0 ran out of GPU memory with 138.3 GiB allocated; rerun with --quick" in line


def test_an_unhandled_out_of_memory_error_is_still_exit_3(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr("planner.cli.listing.run", _allocator_fails)
    assert main(["list", "models"]) == 3
    assert "ran out of GPU memory with 138.3 GiB allocated" in _one_line(capsys.readouterr().err)


def test_the_line_reads_torchs_figure_and_sizes_the_headroom() -> None:
    exc = torch.OutOfMemoryError(TORCH_MESSAGE)
    assert allocated_gib(exc) == pytest.approx(138.30)
    assert allocated_gib(torch.OutOfMemoryError("Of the allocated memory 512.00 MiB is allocated by PyTorch")) == 0.5
    # 138.3 allocated against 136.5 predicted: 1.8 GiB missed, so 3 GiB of headroom (rounded up, plus one)
    assert suggestions(None, 138.3, 136.5)[0] == "--memory-headroom 3"
    assert oom_line("run", 5, exc, None, 136.5, None).startswith("run: rank 5 ran out of GPU memory with 138.3 GiB allocated")
    assert oom_line("run", 5, RuntimeError("no figure"), None, None).count("unknown amount") == 1


def test_a_workers_oom_marks_the_launchers_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """torchrun exits 1 whatever its workers' codes: the worker leaves a mark the launcher reads as exit 3."""
    from planner.cli.run import _OOM_MARK, _oom_marked
    from planner.runtime.oom import RankOutOfMemory, oom_answered

    mark = tmp_path / "oom"
    monkeypatch.setenv(_OOM_MARK, str(mark))
    with pytest.raises(RankOutOfMemory), _oom_marked(), oom_answered("run", 3):
        _allocator_fails()
    assert mark.exists()
    mark.unlink()
    with pytest.raises(ValueError), _oom_marked():
        raise ValueError("not memory")
    assert not mark.exists()
