"""Held-out fidelity (issue 2): published runs outside ../shared/reference, never used to calibrate.

Korthikanti et al. 2022 (A100, 8 to 512 GPUs: step time and per-GPU memory), MT-NLG 530B (A100,
2,240 to 3,360 GPUs) and the Llama 3 paper
(H100, 8,192 and 16,384 GPUs: step time); ``bench/heldout.py`` prints the full table.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import heldout  # noqa: E402


@pytest.fixture(scope="module")
def results() -> list:
    return heldout.compare(heldout.korthikanti_runs() + heldout.mtnlg_runs() + heldout.llama3_runs())


def _column(results: list, index: int) -> list[float]:
    return [abs(row[index]) for row in results if row[index] is not None]


def test_step_times_within_20_percent_mean_under_12(results: list) -> None:
    times = _column(results, 2)
    assert len(times) == 14
    assert max(times) <= 0.20 and sum(times) / len(times) <= 0.12


def test_per_gpu_memory_matches_korthikanti_figure_1(results: list) -> None:
    states, acts = _column(results, 3), _column(results, 4)
    assert len(states) == len(acts) == 8
    assert max(states) <= 0.10 and max(acts) <= 0.05


def test_llama3_uses_the_papers_chunk_layout() -> None:
    for run in heldout.llama3_runs():
        cfg = run.config
        assert cfg.vpp == 8 and cfg.stage_layers[0] == 1 and cfg.stage_layers[-1] == 2
        assert sum(cfg.stage_layers) == len(run.model.layers) and cfg.num_gpus in (8192, 16384)
