"""The plan validator: a valid plan passes, and each rule catches the plan that breaks it."""

from __future__ import annotations

from typing import Any

import pytest

from costmodel.specs import ParallelConfig
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
from planner.plans.build import build_plan
from planner.plans.schema import Plan
from planner.plans.plan_checks import plan_problems, target_problems
from search.types import Candidate, SearchRequest, SearchResult, SearchStats

BASE = dict(tp=2, pp=2, dp=2, sp=True, zero=1, global_batch=16, seq_len=4096)
MODEL = "llama3.1-8b"  # 35 layers: embedding, 32 blocks, final norm, head


def make(target: str = "native", model: str = MODEL, **changes: Any) -> Plan:
    """The plan the search would write for a fixed configuration (on the target's engine)."""
    spec, hw = resolve_model_arg(model), resolve_cluster_arg("dgx-h100")
    cfg = ParallelConfig(**{**BASE, "engine": target, **changes})
    table = build_cost_table(spec, hw)
    req = SearchRequest(gpus=cfg.num_gpus, global_batch=cfg.global_batch, seq_len=cfg.seq_len, target=target)  # type: ignore[arg-type]
    stats = SearchStats(evaluated=1, pruned=0, solver="fixture", status="optimal", gap=0.0, wall_time_s=0.0)
    return build_plan(model, spec, hw, req, SearchResult(Candidate(cfg, estimate_step(table, cfg)), (), stats), False)


def edit(obj: Any, **update: Any) -> Any:
    return obj.model_copy(update=update)


def one_problem_with(plan: Plan, fragment: str) -> list[str]:
    problems = plan_problems(plan)
    assert any(fragment in p for p in problems), problems
    return problems


def test_valid_plans_have_no_problems() -> None:
    assert plan_problems(make()) == []
    assert plan_problems(make(pp=4, dp=1, vpp=2, schedule="interleaved-1f1b", global_batch=8)) == []
    assert plan_problems(make(stage_layers=(10, 25), recompute="selective"), resolve_model_arg(MODEL)) == []


def test_degrees_must_multiply_to_the_gpu_count() -> None:
    plan = make()
    one_problem_with(edit(plan, request=edit(plan.request, gpus=16)), "dp 2 x tp 2 x pp 2 x cp 1 = 8 != 16 GPUs")
    one_problem_with(edit(plan, mesh=edit(plan.mesh, dp=4)), "mesh.dp is 4 but the configuration says 2")


def test_every_layer_in_exactly_one_stage_in_order() -> None:
    plan = make()
    first, second = plan.stages
    dropped = edit(second, layers=second.layers[:-1], layer_recompute=second.layer_recompute[:-1])
    one_problem_with(edit(plan, stages=[first, dropped]), "the stages cover layers 0..33, but the model has 35 layers")
    overlap = edit(second, layers=[16, *second.layers], layer_recompute=["none", *second.layer_recompute])
    one_problem_with(edit(plan, stages=[first, overlap]), "stage 1 holds layers 16..34; it must start at layer 17")
    one_problem_with(edit(plan, stages=[second, first]), "stage 0 is labelled index 1")
    one_problem_with(edit(plan, stages=[first]), "1 stages, expected pp 2 x vpp 1 = 2")


def test_stage_split_and_recompute_match_the_configuration() -> None:
    plan = make()
    first, second = plan.stages
    one_problem_with(edit(plan, stages=[edit(first, layer_recompute=first.layer_recompute[:-1]), second]),
                     "stage 0 has 16 layer_recompute entries for 17 layers")
    full = ["full"] * len(first.layers)
    one_problem_with(edit(plan, stages=[edit(first, layer_recompute=full), second]), "stage 0 recomputes")
    modes = ("full",) + ("none",) * 34
    one_problem_with(make(layer_recompute=modes), "layers [0] (embedding) cannot recompute but are marked full")


def test_batch_divisibility() -> None:
    plan = make()
    one_problem_with(edit(plan, schedule=edit(plan.schedule, num_microbatches=3)), "micro-batch 1 x dp 2 x 3 micro-batches = 6 != global batch 16")


def test_interleaving_rules() -> None:
    plan = make()
    bad = edit(plan, config=edit(plan.config, vpp=2), schedule=edit(plan.schedule, virtual_stages=2))
    one_problem_with(bad, "schedule 1f1b with vpp 2")
    odd = make(pp=4, dp=1, vpp=2, schedule="interleaved-1f1b", global_batch=6)
    one_problem_with(odd, "6 micro-batches are not a multiple of pp 4")


def test_memory_must_fit_and_the_stored_estimate_must_be_the_re_estimate() -> None:
    one_problem_with(make(tp=1, pp=1, dp=1, sp=False, zero=0, global_batch=2), "over the 78.")  # 8B on one H100 (79.21 GiB less its 0.96 GiB headroom)
    plan = make()
    one_problem_with(edit(plan, estimate=edit(plan.estimate, step_time_s=plan.estimate.step_time_s * 1.001)),
                     "stored estimate step_time_s")
    one_problem_with(edit(plan, stages=[edit(plan.stages[0], memory_gib=1.0), plan.stages[1]]), "stage 0 time/memory differ")
    assert plan_problems(edit(plan, estimate=edit(plan.estimate, step_time_s=plan.estimate.step_time_s * (1 + 1e-12)))) == []


def test_schema_version_and_model() -> None:
    plan = make()
    one_problem_with(edit(plan, schema_version="0.9"), "schema_version '0.9' is unknown")
    one_problem_with(edit(plan, model=edit(plan.model, arg="no-such-model")), "the plan names model 'no-such-model' but carries no layer list")
    problems = plan_problems(plan, resolve_model_arg("llama3.1-70b"))
    assert any("the plan was made for another model" in p for p in problems), problems


@pytest.mark.parametrize(("target", "changes", "fragment"), [
    ("megatron", dict(schedule="gpipe"), "megatron runs 1f1b or interleaved-1f1b, not gpipe"),
    ("megatron", dict(layer_recompute=("none", "selective") + ("none",) * 33), "megatron recomputes one mode for every layer"),
    ("deepspeed", dict(zero=2), "deepspeed forbids ZeRO-2 with pipeline parallelism"),
    ("deepspeed", dict(stage_layers=(10, 25)), "deepspeed splits the layers [17, 18] (PipelineModule's partition), not [10, 25]"),
    ("deepspeed", dict(recompute="selective"), "deepspeed checkpoints whole layers: recompute none or full, not selective"),
    ("megatron", dict(stage_layers=(34, 1)), "megatron runs the final norm and the output head in one stage"),
    ("deepspeed", dict(cp=2, dp=1), "deepspeed has no context parallelism"),
    ("deepspeed", dict(recompute="none", layer_recompute=("none", "full") + ("none",) * 33), "deepspeed takes one activation-checkpointing mode"),
    ("torchtitan", dict(zero=1), "torchtitan shards with FSDP2 (zero 3) or not at all"),
    ("torchtitan", dict(schedule="zb-h1"), "torchtitan has no zb-h1 schedule"),
])
def test_target_rules(target: str, changes: dict, fragment: str) -> None:
    one_problem_with(make(target=target, **changes), fragment)
    # the rule is the target's: native refuses only by its own rules (planner.plans.native_rules) or memory
    assert not any(fragment in p for p in plan_problems(make(target="native", **changes)))


@pytest.mark.parametrize(("target", "changes", "fragment"), [
    ("deepspeed", dict(zero=3), "deepspeed refuses native mixture-of-experts layers under ZeRO-3"),
    ("torchtitan", dict(zero=0), "torchtitan takes ep 8 out of data_parallel_shard 1 x cp 1, which it does not divide"),
])
def test_target_rules_of_mixture_of_experts(target: str, changes: dict, fragment: str) -> None:
    moe = dict(model="mixtral-8x7b", pp=1, dp=16, ep=8, global_batch=32, **changes)
    one_problem_with(make(target=target, **moe), fragment)
    assert not any(fragment in p for p in plan_problems(make(target="native", **moe)))  # native: ep is its own rule
@pytest.mark.parametrize("target", ["megatron", "torchtitan", "deepspeed"])
def test_a_plan_is_estimated_on_its_targets_engine(target: str) -> None:
    fitting = dict(tp=2, sp=target == "torchtitan", pp=1, dp=4, zero=0, recompute="full")  # a shape the target expresses
    one_problem_with(make(target=target, engine="native", **fitting), f"config.engine native is not the plan's target {target}")
    assert plan_problems(make(target=target, **fitting)) == []


def test_torchtitan_overlaps_tp_communication_only_when_compiled() -> None:
    """torchtitan's TP overlap is async TP, which its ``CompileConfig`` refuses without torch.compile."""
    shape = dict(tp=2, sp=True, pp=1, dp=4, zero=0, recompute="full", tp_comm_overlap=True)
    one_problem_with(make(target="torchtitan", **shape), "async TP, which needs torch.compile")
    assert plan_problems(make(target="torchtitan", compile=True, **shape)) == []


def test_megatron_block_recompute_is_the_same_n_in_every_chunk() -> None:
    spec = resolve_model_arg(MODEL)
    chunks = ((1, 17), (17, 35))  # default split of pp 2: embedding + 16 blocks | 16 blocks + norm + head

    def first_n(counts: tuple[int, int]) -> tuple[str, ...]:
        modes = ["none"] * 35
        for (start, _), n in zip(chunks, counts):
            modes[start:start + n] = ["full"] * n
        return tuple(modes)

    cfg = ParallelConfig(**BASE, engine="megatron", layer_recompute=first_n((2, 2)))
    assert target_problems("megatron", cfg, spec) == []
    assert target_problems("megatron", cfg.model_copy(update={"layer_recompute": first_n((2, 3))}), spec) != []
    assert plan_problems(make(target="megatron", layer_recompute=first_n((4, 4)))) == []
