"""FSDP units return no views (``planner.runtime.fsdp.fresh_outputs``), and FSDP2's view warning is
an error in the runtime's tests (``conftest.py``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn


class _Viewer(nn.Module):
    """A layer whose output is a view of its result (as a sequence-parallel ``to_local()`` shard is)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)[..., :4]


def _step(fresh: bool) -> torch.Tensor:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from planner.runtime.fsdp import fresh_outputs

    model = _Viewer()
    if fresh:
        fresh_outputs(model)
    fully_shard(model, mesh=init_device_mesh("cpu", (1,)))
    out = model(torch.ones(2, 4))
    out.sum().backward()
    return out


def test_a_view_output_of_an_fsdp_unit_is_an_error_in_these_tests(one_rank_world: None) -> None:
    with pytest.raises(UserWarning, match="returned a view tensor"):
        _step(fresh=False)


def test_fresh_outputs_returns_a_copy_and_the_gradient_flows(one_rank_world: None) -> None:
    out = _step(fresh=True)
    assert out._base is None and out.shape == (2, 4)
