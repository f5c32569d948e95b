"""Saved tensors two traced layers share (``planner.intake.trace.shared``): a ReLU's saved result that
the next convolution saves again as its input is priced once, by the layer that saved it first."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from planner.intake.trace import trace_module
from planner.intake.trace.record import Instance
from planner.intake.trace.shared import shared_saves

sys.path.insert(0, str(Path(__file__).parents[3] / "planner" / "runtime"))
import cnn_model  # noqa: E402

KIB = 1024.0


def test_each_cnn_block_shares_its_input_with_the_layer_before() -> None:
    """The sweep's CNN at one image: the stem's and each block's final ReLU save their outputs (1 KiB
    at 8 channels of 8 x 8, 0.5 KiB after the strided block), which the next block's convolutions
    save as their input; the second block is a stubbed repeat of the first and the strided block
    reads its output (``planner.intake.trace.stubs``), so the repeat's output counts as saved too."""
    spec = trace_module(*cnn_model.build(), name="cnn", micro_batch=1, seq_len=16).spec
    shared = [layer.input_saved_bytes_per_token for layer in spec.layers]
    assert shared == [0.0, KIB, KIB, KIB, KIB / 2, 0.0]
    assert [layer.saves_output for layer in spec.layers] == [True] * 5 + [False]  # the head's mean saves no input
    stored = sum(layer.activation_bytes_per_token - layer.input_saved_bytes_per_token for layer in spec.layers[:3])
    assert stored / KIB == pytest.approx(10.41, abs=0.01)  # measured with torch's tracker, case d0014 at seed 1: 10.41 KiB per image


class _Chain(nn.Module):
    """Linear -> ReLU units: a ReLU saves its result, the next Linear saves its input: one tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Sequential(nn.Linear(8, 8), nn.ReLU()), nn.Sequential(nn.Linear(8, 8), nn.Tanh())
        self.c = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.b(self.a(x)))


def test_a_layer_whose_input_the_previous_one_does_not_save_keeps_it() -> None:
    spec = trace_module(_Chain(), lambda b, s: torch.zeros(b, s, 8), micro_batch=1, seq_len=4).spec
    a, b, c = spec.layers
    assert a.input_saved_bytes_per_token == 0.0 and a.saves_output
    assert b.input_saved_bytes_per_token == 8 * 2  # a's ReLU result, saved by b's Linear too (8 bf16 per token)
    assert c.input_saved_bytes_per_token == 8 * 2 and b.saves_output  # tanh saves its result as well


def test_only_generic_producers_and_other_layers_count() -> None:
    """A storage saved first by a layer the formulas price (not a producer) or by the same layer
    again is not taken off."""
    first = Instance(index=0, unit="a", name="a", saved={7: 64.0})
    second = Instance(index=1, unit="b", name="b", saved={7: 64.0, 8: 32.0}, inputs={0: {7: 64.0}})
    again = Instance(index=2, unit="b", name="b#1", saved={8: 32.0})
    owner = {0: 0, 1: 1, 2: 1}
    got = shared_saves([first, second, again], owner, {0, 1}, lambda inst: inst)
    assert got.inputs == {0: 0.0, 1: 64.0, 2: 0.0} and got.outputs == {0: 64.0, 1: 0.0, 2: 0.0}
    assert shared_saves([first, second, again], owner, {1}, lambda inst: inst).inputs[1] == 0.0
