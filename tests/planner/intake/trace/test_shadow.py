"""Shadows: real values for constant tensors, and what a mask says about attention work."""

from __future__ import annotations

import torch

from planner.intake.trace.shadow import Shadows, mask_facts


def test_causal_masks_bool_and_additive() -> None:
    tril = torch.ones(8, 8, dtype=torch.bool).tril()
    assert mask_facts(tril, 8, 8) == (36 / 64, True)
    additive = torch.zeros(1, 1, 8, 8).masked_fill(~tril, float("-inf"))
    assert mask_facts(additive, 8, 8)[1]
    hf_style = torch.zeros(2, 1, 8, 8).masked_fill(~tril, torch.finfo(torch.float32).min)
    assert mask_facts(hf_style, 8, 8)[1]


def test_window_and_padding_masks_are_not_causal() -> None:
    i = torch.arange(8)
    window = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < 2)
    share, causal = mask_facts(window, 8, 8)
    assert not causal and share == 15 / 64
    assert mask_facts(torch.ones(1, 1, 1, 8, dtype=torch.bool), 8, 8) == (1.0, False)


def test_constant_chains_get_values_and_unknown_inputs_end_them() -> None:
    shadows = Shadows()
    aten = torch.ops.aten
    pos = torch.arange(8, device="meta")
    shadows.run(aten.arange.default, (8,), {"device": torch.device("meta")}, pos)
    mask = aten.le.Tensor(pos[None, :], pos[:, None])
    shadows.run(aten.unsqueeze.default, (pos, 0), {}, pos[None, :])
    assert shadows.get(pos) is not None and shadows.get(pos)[-1] == 7
    unknown = torch.empty(8, device="meta")
    out = aten.add.Tensor(pos, unknown)
    shadows.run(aten.add.Tensor, (pos, unknown), {}, out)
    assert shadows.get(out) is None and shadows.get(mask) is None
    empty = torch.empty(3, device="meta")
    shadows.run(aten.empty.memory_format, ([3],), {"device": torch.device("meta")}, empty)
    assert shadows.get(empty) is None  # uninitialised memory has no value to know
