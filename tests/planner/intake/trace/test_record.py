"""Recorder: per-op FLOPs, bytes, saved tensors, data edges, and the SDPA handling."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from costmodel.local import ACT_BYTES
from planner.intake.trace.record import DispatchRecorder, Recorder, SdpaInterceptor, flop_counter, sdpa_flops, train_bytes
from planner.intake.trace.units import find_units


def test_sdpa_flops_counts_qk_and_pv_and_halves_causal() -> None:
    b, h, s, d = 2, 4, 128, 16
    full = sdpa_flops((b, h, s, d), (b, h, s, d), (b, h, s, d), is_causal=False)
    assert full == 4 * b * h * s * s * d
    assert sdpa_flops((b, h, s, d), (b, h, s, d), (b, h, s, d), is_causal=True) == full / 2
    assert sdpa_flops((b, h, s, d), (b, 1, 64, d), (b, 1, 64, d), False) == 4 * b * h * s * 64 * d  # GQA / cross


def test_flop_counter_counts_the_cpu_flash_kernel() -> None:
    with FakeTensorMode():
        q = torch.empty(1, 2, 8, 4)
        with flop_counter() as counter:
            torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q, 0.0, True)
    assert counter.get_total_flops() == sdpa_flops((1, 2, 8, 4), (1, 2, 8, 4), (1, 2, 8, 4), True)


def test_train_bytes_costs_floats_at_bf16() -> None:
    assert train_bytes(torch.empty(10, device="meta")) == 10 * ACT_BYTES
    assert train_bytes(torch.empty(10, dtype=torch.int64, device="meta")) == 80


class TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.a(x).view(2, 4, 8, 8)
        y = F.scaled_dot_product_attention(q, q, q, is_causal=True).reshape(2, 8, 32)
        return self.b(y)


def _record(module: nn.Module, x: torch.Tensor) -> Recorder:
    units = find_units(module)
    rec = Recorder(units, list(module.parameters()), [], [x])
    counter = flop_counter()
    with torch.enable_grad(), counter, DispatchRecorder(rec, counter), SdpaInterceptor(rec), \
            torch.autograd.graph.saved_tensors_hooks(rec.on_saved, lambda t: t):
        rec.path = "a"
        h = module.a(x)
        rec.path = ""  # container glue: joins layer "a"
        q = h.view(2, 4, 8, 8)
        y = F.scaled_dot_product_attention(q, q, q, is_causal=True).reshape(2, 8, 32)
        rec.path = "b"
        module.b(y)
    return rec


def test_ops_saved_tensors_and_edges_per_layer() -> None:
    with torch.device("meta"):
        module = TwoLayers()
        x = torch.empty(2, 8, 16)
    rec = _record(module, x)
    a, b = rec.instances
    assert (a.name, b.name) == ("a", "b")
    matmuls = [op for op in a.ops if op.kind == "matmul"]
    assert sum(op.flops for op in matmuls) == 2 * 16 * 16 * 32  # 16 tokens x (16 -> 32)
    attention = [op for op in a.ops if op.kind == "attention"]
    assert len(attention) == 1 and attention[0].glue and attention[0].causal
    assert attention[0].flops == sdpa_flops((2, 4, 8, 8), (2, 4, 8, 8), (2, 4, 8, 8), True)
    assert attention[0].dims == (4, 8, 8, 8)
    # saved: the Linear input, then q (one storage for q, k, v), the SDPA output and its log-sum-exp
    assert sum(a.saved.values()) == train_bytes(x)
    assert len(a.glue_saved) == 3 and sum(a.glue_saved.values()) == 2 * 512 * ACT_BYTES + 2 * 4 * 8 * 4
    assert list(b.inputs) == [0] and sum(b.inputs[0].values()) == 2 * 8 * 32 * ACT_BYTES
    assert all(op.bytes_read == op.bytes_written == 0 for op in a.ops if op.kind == "view")


def test_parameters_are_never_activations_or_edges() -> None:
    with torch.device("meta"):
        module = TwoLayers()
        x = torch.empty(2, 8, 16)
    rec = _record(module, x)
    params = {p.untyped_storage()._cdata for p in module.parameters()}
    for inst in rec.instances:
        assert not params & set(inst.saved) and not params & set(inst.glue_saved)
        assert all(not params & set(edge) for edge in inst.inputs.values())
