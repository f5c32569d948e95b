"""Issue 4 acceptance: traced models written in plain torch.nn (no downloads) get valid plans,
checked by the plan validator of issue 3 that ``planner.plan`` runs before returning."""

from __future__ import annotations

import pytest

import planner
from costmodel.specs import GenericLayer
from planner.intake.trace import model_from_factory

CASES = {
    "vit": dict(gpus=16, global_batch=256, seq_len=197),
    "resnet50": dict(gpus=16, global_batch=512, seq_len=1),
    "t5": dict(gpus=16, global_batch=64, seq_len=512),
    "dlrm": dict(gpus=16, global_batch=1024, seq_len=1),
    "mixtral": dict(gpus=16, global_batch=64, seq_len=1024),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_traced_model_gets_a_valid_plan(name: str, factory) -> None:
    spec = model_from_factory(factory(name))
    plan = planner.plan(model=factory(name), cluster="dgx-h100", top_k=1, **CASES[name])
    assert plan.estimate.fits
    covered = [i for stage in plan.stages for i in stage.layers]
    assert covered == list(range(len(spec.layers)))
    assert plan.mesh.dp * plan.mesh.tp * plan.mesh.pp * plan.mesh.cp == CASES[name]["gpus"]


def test_dlrm_tables_do_not_fit_one_gpu_but_the_plan_does(factory) -> None:
    spec = model_from_factory(factory("dlrm"))
    tables = sum(x.params for x in spec.layers if isinstance(x, GenericLayer) and x.tp_mode in ("table", "vocab"))
    assert tables * 2 > 80 * 2**30  # bf16 tables alone exceed an 80 GB GPU
    plan = planner.plan(model=spec, cluster="dgx-h100", gpus=16, global_batch=1024, seq_len=1, top_k=1)
    assert plan.estimate.peak_memory_gib <= plan.estimate.memory_capacity_gib


def test_encoder_decoder_cut_pays_for_the_encoder_output(factory) -> None:
    from costmodel.table import build_cost_table
    from profiles import load_cluster

    spec = model_from_factory(factory("t5"))
    assert spec.extra_edges, "the decoder's cross-attention reads the encoder output: a non-chain edge"
    table = build_cost_table(spec, load_cluster("dgx-h100"))
    edge = spec.extra_edges[0]
    assert table.cut_extra_bytes_per_token[edge.dst - 1] >= edge.bytes_per_token
