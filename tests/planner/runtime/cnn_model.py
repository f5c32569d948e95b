"""A ResNet-style image classifier without a sequence dimension, for the runtime tests (``cnn_model.py:build``).

He et al. 2016's residual blocks (two 3x3 convolutions, identity or strided 1x1 shortcut) with
GroupNorm (Wu and He 2018) in place of BatchNorm, so that a step's result does not depend on how the
batch is split into micro-batches or data-parallel shards (BatchNorm normalises over each
micro-batch). The model is an ``nn.Sequential`` of units that each hold parameters (stem, blocks,
head), so that its forward is the chain of its plan layers. Inputs: 3 x 8 x 8 images; output: 10
class scores.
"""

from __future__ import annotations

import torch
from torch import nn

CHANNELS, CLASSES, SIDE = 8, 10, 8


class Stem(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.norm = nn.Conv2d(3, CHANNELS, 3, padding=1, bias=False), nn.GroupNorm(2, CHANNELS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.conv(x)))


class Residual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1, self.norm1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.GroupNorm(2, cout)
        self.conv2, self.norm2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.GroupNorm(2, cout)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride, bias=False) if stride != 1 or cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.norm1(self.conv1(x)))
        y = self.norm2(self.conv2(y))
        return torch.relu(y + (self.shortcut(x) if self.shortcut is not None else x))


class Head(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.fc = nn.Linear(cin, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean(dim=(2, 3)))


def build() -> tuple[nn.Module, object]:
    """The factory ``--model tests/planner/runtime/cnn_model.py:build`` calls: the model and its
    inputs (images of 3 x SIDE x SIDE; the sequence length is not used)."""
    model = nn.Sequential(Stem(), Residual(CHANNELS, CHANNELS, 1), Residual(CHANNELS, CHANNELS, 1),
                          Residual(CHANNELS, 2 * CHANNELS, 2), Residual(2 * CHANNELS, 2 * CHANNELS, 1), Head(2 * CHANNELS))
    return model, lambda micro_batch, seq_len: torch.zeros(micro_batch, 3, SIDE, SIDE)
