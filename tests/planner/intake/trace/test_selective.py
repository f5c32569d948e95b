"""The bytes the runtime's op-level selective checkpoint keeps of a traced generic layer
(``planner.intake.trace.selective``), against torch's memory tracker on the runtime's own checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.intake.trace.record import OpRecord
from planner.intake.trace.selective import LSE_BYTES_PER_ROW, selective_saved_bytes

BLOCKS = '''
import torch
from torch import nn


class Block(nn.Module):
    """Three projections (addmm: the 1st and 3rd are saved) and a convolution (recomputed)."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 16)
        self.conv = nn.Conv1d(16, 16, 3, padding=1)

    def forward(self, x):
        y = self.c(torch.relu(self.b(torch.relu(self.a(x)))))
        return y + self.conv(y.transpose(1, 2)).transpose(1, 2)


def build():
    return nn.Sequential(Block(), Block()), lambda micro_batch, seq_len: torch.zeros(micro_batch, seq_len, 16)
'''


def _op(name: str, shape: tuple[int, ...], glue: bool = False, dtype: str = "float32") -> OpRecord:
    return OpRecord(op=name, module="m", kind="matmul", flops=1.0, bytes_read=0.0, bytes_written=0.0,
                    out_shapes=(shape,), out_dtypes=(dtype,), glue=glue)


def test_odd_matmuls_and_attention_outputs_are_kept_glue_and_other_ops_are_not() -> None:
    ops = [_op("aten.addmm", (4, 8)), _op("aten.convolution", (4, 8, 8)), _op("aten.mm", (4, 16)),
           _op("aten.addmm", (4, 32)), _op("aten.mm", (4, 64), glue=True), _op("aten.bmm", (2, 4, 4)),
           _op("aten.scaled_dot_product_attention", (2, 4, 16, 8), dtype="bfloat16")]
    sdpa = 2 * 4 * 16 * 8 * 2 + 2 * 4 * 16 * LSE_BYTES_PER_ROW
    assert selective_saved_bytes(ops) == 4 * 8 * 2 + 4 * 32 * 2 + sdpa  # bf16 outputs of the 1st and 3rd matmul
    assert selective_saved_bytes([_op("aten.convolution", (4, 8, 8))]) == 0.0


def _kept_after_forward(model: object, mode: str, tokens: tuple[int, int]) -> int:
    """Activation bytes torch's tracker sees held after one forward of ``model`` under ``mode``."""
    import torch
    from torch.distributed._tools.mem_tracker import MemTracker

    from planner.runtime.recompute import apply_recompute

    apply_recompute(model, mode)
    x = torch.zeros(*tokens, 16, dtype=torch.bfloat16, requires_grad=True)
    tracker = MemTracker()
    tracker.track_external(model, x)
    with tracker:
        out = model(x)
        snap = tracker.get_tracker_snapshot()
    del out
    return next(v for k, v in next(iter(snap.values())).items() if getattr(k, "value", k) == "Activation")


def test_the_traced_figure_is_what_the_runtime_checkpoint_keeps(tmp_path: Path) -> None:
    """A traced block of three ``nn.Linear`` and a convolution: the spec's figure per token, times the
    tokens, is what the runtime's selective checkpoint holds beyond the full checkpoint's output."""
    torch = pytest.importorskip("torch")
    from planner.intake.trace import model_from_factory

    path = tmp_path / "blocks.py"
    path.write_text(BLOCKS)
    spec = model_from_factory(f"{path}:build", seq_len=8)
    layer = spec.layers[0]
    assert layer.kind == "generic" and layer.selective_saved_bytes_per_token == 96.0
    import importlib.util

    mod_spec = importlib.util.spec_from_file_location("selective_blocks", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    kept = {}
    for mode in ("full", "selective"):
        torch.manual_seed(0)
        kept[mode] = _kept_after_forward(module.Block().to(torch.bfloat16), mode, (4, 8))
    assert kept["selective"] - kept["full"] == 4 * 8 * layer.selective_saved_bytes_per_token
