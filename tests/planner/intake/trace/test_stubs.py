"""Stubs: one representative runs per input signature, the others return fresh outputs of its shapes."""

from __future__ import annotations

import torch
from torch import nn

from planner.intake.trace.stubs import OPAQUE, StubInstaller, input_signature, template_rep


class Counting(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        self.calls += 1
        return self.lin(x), None


def _blocks(n: int) -> dict[str, nn.Module]:
    with torch.device("meta"):
        return {str(i): Counting() for i in range(n)}


def test_only_the_representative_runs_and_stub_outputs_are_fresh() -> None:
    modules = _blocks(3)
    x = torch.empty(2, 5, 8, device="meta")
    with StubInstaller(modules, {0: ["0", "1", "2"]}, set()):
        y0, none0 = modules["0"](x)
        y1, none1 = modules["1"](y0)
        y2, _ = modules["2"](y1)
    assert [m.calls for m in modules.values()] == [1, 0, 0]
    assert none0 is None and none1 is None
    assert y1.shape == y0.shape and y1.untyped_storage()._cdata != y0.untyped_storage()._cdata
    assert y2.requires_grad  # the stub takes a parameter in, so its outputs join the autograd graph


def test_a_new_input_shape_runs_the_block_for_real() -> None:
    modules = _blocks(2)
    with StubInstaller(modules, {0: ["0", "1"]}, set()):
        modules["0"](torch.empty(2, 5, 8, device="meta"))
        modules["1"](torch.empty(2, 7, 8, device="meta"))
    assert [m.calls for m in modules.values()] == [1, 1]


def test_forward_is_restored_on_exit() -> None:
    modules = _blocks(2)
    with StubInstaller(modules, {0: ["0", "1"]}, {"1"}):
        assert "forward" in modules["1"].__dict__
    assert "forward" not in modules["0"].__dict__ and "forward" not in modules["1"].__dict__
    modules["1"](torch.empty(1, 8, device="meta"))
    assert modules["1"].calls == 1


def test_opaque_units_never_run_and_return_their_input_shape() -> None:
    modules = _blocks(1)
    with StubInstaller(modules, {}, {"0"}):
        out = modules["0"](torch.empty(3, 8, device="meta"))
    assert modules["0"].calls == 0 and out.shape == (3, 8)


def test_signature_and_template_helpers() -> None:
    a = torch.empty(2, 3, device="meta")
    assert input_signature((a,), {"flag": True}) == input_signature((torch.empty(2, 3, device="meta"),), {"flag": True})
    assert input_signature((a,), {}) != input_signature((a.float()[:1],), {})
    assert template_rep("blocks.0|meta|float32:2,3") == "blocks.0"
    assert template_rep(f"{OPAQUE}|cpu|float32:1") == OPAQUE
