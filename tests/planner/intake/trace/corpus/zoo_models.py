"""torchvision's ResNet-50 and a torchrec-style DLRM from the trace tests' zoo (``../zoo.py``), full size
and small, under the corpus's factory names."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("meshplan_corpus_zoo", Path(__file__).parents[1] / "zoo.py")
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)


def resnet50():
    return zoo.resnet50()


def resnet50_small():
    import torch

    model = zoo.ResNet50(classes=10)
    return model, lambda micro_batch, seq_len: torch.zeros(micro_batch, 3, 32, 32)


def dlrm():
    return zoo.dlrm()


def dlrm_small():
    import torch

    model = zoo.DLRM(tables=(100, 200, 50), dim=8, dense=4)
    return model, lambda micro_batch, seq_len: (torch.zeros(micro_batch, 4), torch.zeros(micro_batch, 3, 1, dtype=torch.long))
