"""DeepSpeed 0.19.8's own code reads every DeepSpeed export (the ``test`` extra installs it with
``DS_BUILD_OPS=0``, its default: no CUDA ops are built).

Each config goes through ``deepspeed.runtime.config.DeepSpeedConfig`` with a model-parallel unit
(``mpu``, the Megatron interface DeepSpeed takes) whose data-parallel world size is the plan's dp,
after ``deepspeed.comm`` is initialised with a one-process gloo group: DeepSpeed checks the batch
identity, the ZeRO and precision sections and the pipeline's ZeRO limit itself. The code-side
``PipelineModule`` partition is reproduced with DeepSpeed's own ``partition_uniform`` /
``partition_balanced`` (``runtime/utils.py``), as ``PipelineModule._partition_layers`` calls them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from costmodel.specs import TransformerLayer
from planner.outputs.export import export
from planner.plans.named_model import plan_model
from planner.plans.plan_checks import plan_problems


class PlanMpu:
    """The model-parallel unit interface DeepSpeed reads (Megatron's ``mpu``), sized like the plan."""

    def __init__(self, plan: Any) -> None:
        self.mesh = plan.mesh

    def get_data_parallel_world_size(self) -> int:
        return self.mesh.dp

    def get_model_parallel_world_size(self) -> int:
        return self.mesh.tp

    def get_pipeline_model_parallel_world_size(self) -> int:
        return self.mesh.pp


@pytest.fixture(scope="module")
def parsed(engine_plans, tmp_path_factory) -> Iterator[dict[str, tuple[Any, Any, Any]]]:
    """(plan, export, DeepSpeedConfig) per DeepSpeed case."""
    import deepspeed
    import deepspeed.comm as dist
    from deepspeed.runtime.config import DeepSpeedConfig

    import torch.distributed

    created = not dist.is_initialized()
    if created:
        store = tmp_path_factory.mktemp("ds") / "store"
        deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, init_method=f"file://{store}", rank=0, world_size=1)
    out = {}
    for cid, plan in engine_plans("deepspeed"):
        assert plan_problems(plan) == [], cid
        result = export(plan, "deepspeed")
        out[cid] = (plan, result, DeepSpeedConfig(dict(result.config), mpu=PlanMpu(plan)))
    yield out
    if created:  # later tests start their own (fake) process groups
        torch.distributed.destroy_process_group()


def test_every_model_is_covered(parsed) -> None:
    assert {"llama8b-deepspeed-pipeline", "llama70b-deepspeed", "llama405b-deepspeed", "gpt175b-deepspeed", "mixtral-deepspeed"} <= set(parsed)


def test_deepspeed_derives_the_planned_batch_and_sharding(parsed) -> None:
    for cid, (plan, _, ds) in parsed.items():
        s = plan.schedule
        assert ds.world_size == plan.mesh.dp, cid
        assert (ds.train_batch_size, ds.train_micro_batch_size_per_gpu, ds.gradient_accumulation_steps) == (s.global_batch, s.micro_batch, s.num_microbatches), cid
        assert ds.zero_optimization_stage == plan.mesh.zero, cid
        assert ds.bfloat16_config.enabled == (plan.config.param_bytes == 2), cid


def test_pipeline_partition_is_the_planned_split(parsed) -> None:
    from deepspeed.runtime.utils import partition_balanced, partition_uniform

    for cid, (plan, result, _) in parsed.items():
        module = result.code["pipeline_module"]
        if module is None:
            continue
        model, parts = plan_model(plan), module["num_stages"]
        method = module["partition_method"]
        if method == "uniform":
            bounds = partition_uniform(num_items=len(model.layers), num_parts=parts)
        else:  # type:REGEX, matched against the layer classes (Megatron-DeepSpeed's ParallelTransformerLayerPipe)
            pattern = re.compile(method.split(":", 1)[1], re.IGNORECASE)
            names = ["ParallelTransformerLayerPipe" if isinstance(x, TransformerLayer) else type(x).__name__ for x in model.layers]
            bounds = partition_balanced(weights=[1 if pattern.search(n) else 0 for n in names], num_parts=parts)
        planned = [0]
        for st in plan.stages:
            planned.append(planned[-1] + len(st.layers))
        assert list(bounds) == planned, f"{cid}: DeepSpeed would split {list(bounds)}, the plan {planned}"
        assert module["activation_checkpoint_interval"] == (1 if plan.config.recompute == "full" else 0), cid


def test_offload_reaches_deepspeeds_zero_and_checkpointing_config(parsed) -> None:
    """``zero_optimization.offload_optimizer`` (CPU) and ``activation_checkpointing.cpu_checkpointing``
    as DeepSpeedConfig reads them."""
    seen = False
    for cid, (plan, _, ds) in parsed.items():
        device = ds.zero_config.offload_optimizer.device if ds.zero_config.offload_optimizer else None
        assert (device == "cpu") == plan.config.offload_optimizer, cid
        assert ds.activation_checkpointing_config.cpu_checkpointing == plan.config.offload_activations, cid
        seen |= plan.config.offload_optimizer and plan.config.offload_activations
    assert seen


def test_fp8_is_refused_in_one_line(plan_of) -> None:
    from planner.plans.engines.common import UnsupportedPlanError

    plan = plan_of(tp=1, pp=2, dp=4, zero=1, global_batch=64, seq_len=4096, recompute="full", precision="fp8")
    with pytest.raises(UnsupportedPlanError, match="config.precision") as err:
        export(plan, "deepspeed")
    assert "\n" not in str(err.value) and "--precision bf16" in str(err.value)


def test_native_moe_with_zero3_is_refused_as_deepspeeds_engine_does(plan_of) -> None:
    from planner.plans.engines.common import UnsupportedPlanError

    plan = plan_of(model="mixtral-8x7b", tp=1, pp=1, dp=32, ep=1, zero=3, global_batch=256, seq_len=4096, recompute="full")
    with pytest.raises(UnsupportedPlanError, match="mesh.zero"):
        export(plan, "deepspeed")
