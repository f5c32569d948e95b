"""``meshplan list models|gpus|clusters`` run as a separate process (stdout is a pipe: plain text)."""

from __future__ import annotations

import pytest

from planner.intake.models import list_presets
from profiles import list_clusters, list_gpus


def _rows(stdout: str) -> dict[str, list[str]]:
    """Plain-text rows keyed by their first cell (the name)."""
    return {line.split()[0]: line.split() for line in stdout.splitlines()[1:]}


def test_list_models_prints_every_preset_with_its_shape(meshplan) -> None:
    proc = meshplan("list", "models")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].split()[:4] == ["name", "params", "layers", "hidden"]
    rows = _rows(proc.stdout)
    assert sorted(rows) == sorted(name for name, _ in list_presets())
    assert rows["llama3.1-8b"][1:5] == ["8.0B", "32", "4096", "32/8"]
    assert rows["mixtral-8x7b"][7:9] == ["8", "top-2"]


def test_list_gpus(meshplan) -> None:
    proc = meshplan("list", "gpus")
    assert proc.returncode == 0, proc.stderr
    rows = _rows(proc.stdout)
    assert list(rows) == [gpu.name for gpu in list_gpus()]
    assert rows["a100-80gb"][1:4] == ["312", "79.15", "2039"]


def test_list_clusters(meshplan) -> None:
    proc = meshplan("list", "clusters")
    assert proc.returncode == 0, proc.stderr
    rows = _rows(proc.stdout)
    assert list(rows) == [cluster.name for cluster in list_clusters()]
    assert rows["dgx-a100"][1:4] == ["a100-80gb", "79.15", "8"]
    assert "─" not in proc.stdout and "\x1b[" not in proc.stdout  # no box drawing or colour in a pipe


@pytest.mark.parametrize("args", [["list"], ["list", "datasets"]])
def test_list_needs_a_known_kind(meshplan, one_line_error, args: list[str]) -> None:
    one_line_error(meshplan(*args), 2, "list: ")
