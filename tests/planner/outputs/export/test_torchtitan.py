"""torchtitan export: golden config-registry module, batch and degree identities, module names, refusals
(the engine's own parser and pipeline split read the exports in test_engines_torchtitan.py)."""

from __future__ import annotations

import pytest

from planner.outputs.export import engine_export, text_of
from planner.plans.named_model import plan_model
from planner.plans.engines.common import UnsupportedPlanError

FSDP_PP = dict(tp=2, pp=2, dp=4, sp=True, zero=3, global_batch=64, seq_len=4096, micro_batch=2)


def unchecked(plan, target: str):
    """The exporter alone (``engine_export``): these tests check its mapping on fixed configurations,
    some over an H100's memory, which ``export`` refuses before exporting (tested in test_api.py)."""
    return engine_export(plan, target, plan_model(plan))


def test_golden_interleaved_fsdp(plan_of, golden) -> None:
    plan = plan_of(**{**FSDP_PP, "pp": 2, "vpp": 2, "schedule": "interleaved-1f1b"}, recompute="full")
    golden("torchtitan_llama8b_interleaved.py.txt", text_of(unchecked(plan, "torchtitan"), "torchtitan"))


def test_degrees_batch_and_schedule(plan_of) -> None:
    plan = plan_of(**FSDP_PP)
    cfg = unchecked(plan, "torchtitan")
    par, train = cfg.parallelism, cfg.training
    dp = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
    assert dp * par["tensor_parallel_degree"] * par["pipeline_parallel_degree"] * par["context_parallel_degree"] == plan.request.gpus
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (1, 4)
    assert par["pipeline_parallel_schedule"] == "1F1B"
    # local_batch_size / pipeline_parallel_microbatch_size micro-batches per step, no accumulation
    assert train["local_batch_size"] // par["pipeline_parallel_microbatch_size"] == plan.schedule.num_microbatches
    assert train["local_batch_size"] * dp == train["global_batch_size"] == 64
    assert train["seq_len"] == 4096


def test_without_pipelining_the_micro_batch_is_the_local_batch(plan_of) -> None:
    plan = plan_of(tp=1, dp=16, zero=0, global_batch=128, seq_len=4096, micro_batch=2)
    cfg = unchecked(plan, "torchtitan")
    assert cfg.parallelism["data_parallel_replicate_degree"] == 16 and "module_fqns_per_model_part" not in cfg.parallelism
    # torchtitan accumulates global / (local x dp) = 4 steps: the plan's micro-batches
    assert cfg.training["global_batch_size"] // (cfg.training["local_batch_size"] * 16) == plan.schedule.num_microbatches == 4


def test_module_fqns_cover_every_layer_once_in_chunk_order(plan_of) -> None:
    plan = plan_of(**{**FSDP_PP, "vpp": 2, "schedule": "interleaved-1f1b"}, stage_layers=(8, 9, 9, 9))
    parts = unchecked(plan, "torchtitan").parallelism["module_fqns_per_model_part"]
    assert len(parts) == 4
    flat = [name for part in parts for name in part]
    assert flat == ["tok_embeddings"] + [f"layers.{i}" for i in range(32)] + ["norm", "lm_head"]
    assert [len(p) for p in parts] == [8, 9, 9, 9]


@pytest.mark.parametrize(("mode", "code"), [("none", "None"), ("full", "FullAC.Config()"), ("selective", "SelectiveAC.Config()")])
def test_activation_checkpoint(plan_of, mode: str, code: str) -> None:
    export = unchecked(plan_of(**FSDP_PP, recompute=mode), "torchtitan")
    assert export.activation_checkpoint == mode and f"config.activation_checkpoint = {code}\n" in export.python()


def test_pipelined_jobs_disable_cuda_graphs_and_reduce_in_fp32(plan_of) -> None:
    export = unchecked(plan_of(**FSDP_PP), "torchtitan")
    assert export.training["disable_cuda_graphs"] is True and export.training["mixed_precision_reduce"] == "float32"
    assert "disable_cuda_graphs" not in unchecked(plan_of(tp=1, dp=16, zero=0, global_batch=128, seq_len=4096), "torchtitan").training


@pytest.mark.parametrize(("change", "field"), [
    ({"zero": 1}, "mesh.zero"),
    ({"zero": 2}, "mesh.zero"),
    ({"sp": False}, "mesh.sp"),
    ({"schedule": "zb-h1"}, "schedule.name"),
    ({"tp_comm_overlap": True}, "config.tp_comm_overlap"),
])
def test_refusals_name_the_field(plan_of, change: dict, field: str) -> None:
    plan = plan_of(**{**FSDP_PP, **change})
    with pytest.raises(UnsupportedPlanError) as err:
        unchecked(plan, "torchtitan")
    assert err.value.field == field and field in str(err.value)


def test_a_compiled_plan_writes_compile_config_with_async_tp_where_it_overlaps(plan_of) -> None:
    compiled = unchecked(plan_of(**{**FSDP_PP, "compile": True, "tp_comm_overlap": True}), "torchtitan")
    assert compiled.compile == {"enable": True, "components": ["model", "loss"], "enable_async_tensor_parallel": True}
    assert ("config.compile = CompileConfig(enable=True, components=['model', 'loss'], enable_async_tensor_parallel=True)\n"
            in compiled.python())
    assert "from torchtitan.config.configs import CompileConfig" in compiled.python()
    assert unchecked(plan_of(**{**FSDP_PP, "compile": True}), "torchtitan").compile["enable_async_tensor_parallel"] is False
    eager = unchecked(plan_of(**FSDP_PP), "torchtitan")
    assert eager.compile is None and "compile" not in eager.python()


def test_refuses_per_layer_recompute_mix(plan_of) -> None:
    modes = ["none"] * 35
    modes[20] = "full"
    with pytest.raises(UnsupportedPlanError, match=r"stages\[1\]\.layer_recompute"):
        unchecked(plan_of(**FSDP_PP, layer_recompute=tuple(modes)), "torchtitan")


def test_refuses_expert_parallelism_without_sharded_data_parallelism(plan_of) -> None:
    plan = plan_of(model="mixtral-8x7b", tp=1, pp=1, dp=32, ep=8, zero=0, global_batch=256, seq_len=4096)
    with pytest.raises(UnsupportedPlanError, match="mesh.ep"):
        unchecked(plan, "torchtitan")
