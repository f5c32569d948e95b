"""A traced generic layer under ``selective`` recomputation keeps its output and what the runtime's
op-level policy saves (``costmodel.layer_other.selective_kept_bytes``), not its stored activations."""

from __future__ import annotations

import pytest

from costmodel.layer_other import generic_cost, selective_kept_bytes
from costmodel.local import LocalConfig
from costmodel.specs import GenericLayer
from profiles import load_cluster


def _layer(kept: float | None, tp_mode: str = "none") -> GenericLayer:
    return GenericLayer(name="conv", params=1184, fwd_flops_per_token=147456.0, fwd_mem_bytes_per_token=11344.0,
                        activation_bytes_per_token=5136.0, output_bytes_per_token=1024.0, tp_mode=tp_mode,
                        selective_saved_bytes_per_token=kept)


def _cfg(recompute: str, tp: int = 1) -> LocalConfig:
    return LocalConfig(micro_batch=4, seq_len=1, tp=tp, cp=1, ep=1, sp=False, recompute=recompute, flash=True, zero3_group=1)


@pytest.mark.parametrize("kept", [0.0, 20.0])
def test_selective_keeps_the_output_and_the_policy_outputs(kept: float) -> None:
    cluster = load_cluster("dgx-a100")
    cost = generic_cost(_layer(kept), _cfg("selective"), cluster)
    none = generic_cost(_layer(kept), _cfg("none"), cluster)
    full = generic_cost(_layer(kept), _cfg("full"), cluster)
    assert cost.act_bytes == 4 * (1024.0 + kept)
    assert cost.work_bytes == none.act_bytes + 2 * 4 * 1024.0  # recomputed in its backward (layer_other.recompute_transient_bytes)
    assert full.act_bytes <= cost.act_bytes < none.act_bytes


def test_unmeasured_layers_keep_their_stored_activations_under_selective() -> None:
    cluster = load_cluster("dgx-a100")
    assert selective_kept_bytes(_layer(None), 4.0, 1) is None
    assert generic_cost(_layer(None), _cfg("selective"), cluster).act_bytes == 4 * 5136.0


def test_a_tp_split_layer_keeps_its_share_of_the_policy_outputs() -> None:
    assert selective_kept_bytes(_layer(20.0, "column"), 4.0, 2) == 40.0


@pytest.mark.parametrize("recompute", ["selective", "full"])
def test_the_recomputed_activations_meet_the_output_gradient(recompute: str) -> None:
    """The transient of a recomputed layer's backward: its activations but its input, the two
    unsaved operands of its last op and its output's gradient (``recompute_transient_bytes``)."""
    cluster = load_cluster("dgx-a100")
    assert generic_cost(_layer(20.0), _cfg(recompute), cluster).work_bytes == 4 * (5136.0 + 2 * 1024.0)
    split = generic_cost(_layer(20.0, "column"), _cfg(recompute, tp=2), cluster)
    assert split.work_bytes == 4 * (5136.0 + 2 * 1024.0) / 2
    # not recomputed: the two unsaved operands of its forward's last op alone (RECOMPUTE_LIVE_OPERANDS)
    assert generic_cost(_layer(20.0), _cfg("none"), cluster).work_bytes == 2 * 4 * 1024.0
