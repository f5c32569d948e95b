"""torchtitan 0.3.0's own code reads every torchtitan export (the ``test`` extra installs it).

Each export (a config-registry module) goes through ``torchtitan.config.manager.ConfigManager``
(imports the module, calls the function, rebuilds the ``Trainer.Config`` with tyro and runs its
``__post_init__`` checks), ``ParallelDims`` (degrees against the world size) and the pipeline split
(``_split_module`` on a torchtitan Llama built on ``meta`` with the plan's block count, and the
rank-to-stage mapping of the plan's schedule). Values derived by torchtitan must equal the plan's.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import pytest

from costmodel.specs import TransformerLayer
from planner.outputs.export import render
from planner.plans.named_model import plan_model
from planner.plans.plan_checks import plan_problems


@pytest.fixture(scope="module")
def parsed(engine_plans, tmp_path_factory) -> dict[str, tuple[Any, Any]]:
    """(plan, torchtitan Trainer.Config) per torchtitan case, parsed by torchtitan's ConfigManager."""
    from torchtitan.config.manager import ConfigManager

    folder = tmp_path_factory.mktemp("registry")
    sys.path.insert(0, str(folder))
    out = {}
    try:
        for cid, plan in engine_plans("torchtitan"):
            assert plan_problems(plan) == [], cid
            name = "meshplan_job_" + cid.replace("-", "_")
            (folder / f"{name}.py").write_text(render(plan, "torchtitan"), encoding="utf-8")
            out[cid] = (plan, ConfigManager().parse_args(["--module", name, "--config", "meshplan_job"]))
    finally:
        sys.path.remove(str(folder))
    return out


def test_every_model_and_shape_is_covered(parsed) -> None:
    ids = set(parsed)
    assert {"llama8b-torchtitan-interleaved", "llama70b-torchtitan-uneven", "llama405b-torchtitan-cp", "gpt175b-torchtitan", "mixtral-torchtitan"} <= ids


def test_parallel_dims_tile_the_world_as_planned(parsed) -> None:
    from torchtitan.distributed.parallel_dims import ParallelDims

    for cid, (plan, cfg) in parsed.items():
        dims = ParallelDims.from_config(cfg.parallelism, world_size=plan.request.gpus)  # asserts the product
        m = plan.mesh
        assert (dims.dp_replicate * dims.dp_shard, dims.tp, dims.pp, dims.cp, dims.ep) == (m.dp, m.tp, m.pp, m.cp, m.ep), cid
        assert dims.dp_shard == (m.dp if m.zero == 3 else 1), cid
        assert cfg.parallelism.enable_sequence_parallel == (m.tp > 1), cid


def test_batch_and_micro_batches_as_planned(parsed) -> None:
    for cid, (plan, cfg) in parsed.items():
        t, s, dp = cfg.training, plan.schedule, plan.mesh.dp
        assert (t.global_batch_size, t.seq_len) == (s.global_batch, plan.config.seq_len), cid
        accumulation = t.global_batch_size // (t.local_batch_size * dp)
        assert accumulation * t.local_batch_size * dp == t.global_batch_size, cid
        per_step = t.local_batch_size // cfg.parallelism.pipeline_parallel_microbatch_size if plan.mesh.pp > 1 else 1
        assert accumulation * per_step == s.num_microbatches, cid
        assert t.mixed_precision_reduce == "float32"


def test_compile_and_async_tp_reach_torchtitans_config(parsed) -> None:
    """A compiled plan turns on ``compile.enable`` (model and loss), and async TP exactly where the
    plan overlaps TP communication; eager plans keep torchtitan's default (off)."""
    for cid, (plan, cfg) in parsed.items():
        assert cfg.compile.enable == (plan.config.compile is True), cid
        assert cfg.compile.enable_async_tensor_parallel == plan.config.tp_comm_overlap, cid
    assert any(cfg.compile.enable_async_tensor_parallel for _, cfg in parsed.values())
    assert not all(cfg.compile.enable for _, cfg in parsed.values())


def test_optimizer_offload_reaches_torchtitans_config(parsed) -> None:
    """``training.enable_cpu_offload`` (FSDP2 CPUOffloadPolicy) for optimizer offload."""
    for cid, (plan, cfg) in parsed.items():
        assert cfg.training.enable_cpu_offload == plan.config.offload_optimizer, cid
    assert any(plan.config.offload_optimizer for plan, _ in parsed.values())


def test_activation_offload_is_refused_in_one_line(plan_of) -> None:
    from planner.outputs.export import export
    from planner.plans.engines.common import UnsupportedPlanError

    plan = plan_of(cluster="grand-teton-h100", dp=8, zero=3, global_batch=64, seq_len=4096, recompute="full", offload_activations=True)
    with pytest.raises(UnsupportedPlanError, match="config.offload_activations"):
        export(plan, "torchtitan")


def test_activation_checkpointing_policy_is_the_plans(parsed) -> None:
    from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC

    kinds = {"full": FullAC.Config, "selective": SelectiveAC.Config}
    for cid, (plan, cfg) in parsed.items():
        model = plan_model(plan)
        (mode,) = {m for st in plan.stages for i, m in zip(st.layers, st.layer_recompute) if isinstance(model.layers[i], TransformerLayer)}
        assert (cfg.activation_checkpoint is None) if mode == "none" else isinstance(cfg.activation_checkpoint, kinds[mode]), cid


def test_pipeline_split_keeps_every_module_once_on_the_planned_rank(parsed) -> None:
    import torch
    from torchtitan.distributed.pipeline_parallel import _get_pp_rank_to_stage_indices_mapping, _split_module
    from torchtitan.models.llama3 import model_registry

    base = model_registry("debugmodel").model
    for cid, (plan, cfg) in parsed.items():
        par = cfg.parallelism
        if par.pipeline_parallel_degree == 1:
            continue
        blocks = sum(isinstance(x, TransformerLayer) for x in plan_model(plan).layers)
        with torch.device("meta"):
            whole = dataclasses.replace(base, layers=[base.layers[0]] * blocks).build()
        everything = {name for name, _ in whole.named_parameters()}
        seen: list[str] = []
        for names in par.module_fqns_per_model_part:
            seen += [name for name, _ in _split_module(whole, names).named_parameters()]
        assert sorted(seen) == sorted(everything), f"{cid}: the split loses or repeats modules"
        assert [len(st.layers) for st in plan.stages] == [len(names) for names in par.module_fqns_per_model_part], cid
        stages, pp = len(plan.stages), plan.mesh.pp
        for rank in range(pp):
            on_rank = _get_pp_rank_to_stage_indices_mapping(rank, pp, par.pipeline_parallel_schedule, stages)
            assert list(on_rank) == [st.index for st in plan.stages if st.pp_rank == rank], cid
