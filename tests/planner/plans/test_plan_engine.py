"""``planner.plan(target=...)`` searches and estimates on the target's engine (issue 11 item 1): the
plan's configuration names that engine, ``planner.estimate`` with the same flags and target gives the
plan's step time, ``planner.estimate_plan`` reproduces it, and the engine's terms change the result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import planner
from planner.errors import InputError

LLAMA70 = dict(model="llama3.1-70b", cluster="dgx-h100", gpus=64, global_batch=128, seq_len=4096)
SHAPE = dict(tp=8, pp=4, recompute="full")
"""Fixed so that the searches stay short; the rest (dp, ZeRO, micro-batch, vpp, split, SP, overlap) is searched."""


def _flags(plan: Any, target: str) -> dict[str, Any]:
    """``planner.estimate`` keywords of the plan's configuration on ``target``."""
    c = plan.config
    return dict(**LLAMA70, tp=c.tp, pp=c.pp, cp=c.cp, vpp=c.vpp, micro_batch=c.micro_batch, sp=c.sp, recompute=c.recompute, zero=c.zero,
                schedule=c.schedule, stage_layers=c.stage_layers, target=target, tp_overlap=c.tp_comm_overlap or None,
                dp_overlap=c.overlap_grad_reduce)


@pytest.mark.parametrize("target", ["megatron", "torchtitan", "deepspeed"])
def test_plan_is_searched_and_estimated_on_the_targets_engine(tmp_path: Path, target: str) -> None:
    plan = planner.plan(**LLAMA70, **SHAPE, target=target, top_k=1)
    cfg = plan.config
    assert cfg.engine == target
    if cfg.layer_recompute is None:  # the uniform plans have flags: estimate them on the same engine
        same = planner.estimate(**_flags(plan, target))
        assert same.step_time_s == pytest.approx(plan.estimate.step_time_s, rel=1e-12)
        assert same.peak_memory_gib == pytest.approx(plan.estimate.peak_memory_gib, rel=1e-12)
    path = tmp_path / "plan.json"
    planner.save_plan(plan, str(path))
    again = planner.estimate_plan(str(path))
    assert again.step_time_s == pytest.approx(plan.estimate.step_time_s, rel=1e-12)
    assert again.config["engine"] == target
    if target == "torchtitan":  # eager blocks, op-level SAC, FSDP2: slower than Megatron-LM's fused kernels
        fused = planner.estimate(**{**_flags(plan, target), "target": "megatron", "zero": cfg.zero})
        assert plan.estimate.step_time_s > 1.05 * fused.step_time_s
        assert not cfg.tp_comm_overlap and cfg.compile is None  # async TP needs torch.compile, off by default
    if target == "deepspeed":  # pipeline-engine host time and the gradient reduction after the flush
        fused = planner.estimate(**{**_flags(plan, target), "target": "megatron"})
        assert plan.estimate.step_time_s > 1.02 * fused.step_time_s
        assert cfg.overlap_grad_reduce == (cfg.zero >= 1) and cfg.overlap_param_gather == (cfg.zero == 3)


def test_a_compiled_torchtitan_plan_fuses_and_overlaps_tp_as_async_tp() -> None:
    """``compile=True`` reaches every candidate: the plan compiles, overlaps its TP collectives (async
    TP needs the compiled model), is faster than the eager plan of the same request, and the
    estimate with the same flags reproduces it."""
    eager = planner.plan(**LLAMA70, **SHAPE, target="torchtitan", top_k=0)
    plan = planner.plan(**LLAMA70, **SHAPE, target="torchtitan", compile=True, top_k=0)
    assert plan.config.compile is True and plan.config.tp_comm_overlap
    assert plan.estimate.step_time_s < 0.97 * eager.estimate.step_time_s
    same = planner.estimate(**_flags(plan, "torchtitan"), compile=True)
    assert same.step_time_s == pytest.approx(plan.estimate.step_time_s, rel=1e-12)
    with pytest.raises(InputError, match="compile must be True, False or None"):
        planner.plan(**LLAMA70, **SHAPE, target="torchtitan", compile="yes")


def test_deepspeed_without_zero_reduces_after_the_backward() -> None:
    plan = planner.plan(**LLAMA70, **SHAPE, zero=0, target="deepspeed", top_k=0)
    assert plan.config.zero == 0 and not plan.config.overlap_grad_reduce
    from planner.outputs.export import render

    config = render(plan, "deepspeed")
    assert '"overlap_comm"' not in config  # stage 0 has no overlap_comm: the plan does not assume one
    with pytest.raises(InputError, match="overlap_comm needs zero 1-3"):
        planner.estimate(**LLAMA70, tp=8, pp=4, zero=0, target="deepspeed", dp_overlap=True)


def test_same_target_plans_are_byte_identical() -> None:
    first = planner.plan(**LLAMA70, **SHAPE, target="deepspeed", top_k=2).to_json()
    assert planner.plan(**LLAMA70, **SHAPE, target="deepspeed", top_k=2).to_json() == first


def test_deepspeed_plans_recompute_whole_layers_only() -> None:
    """DeepSpeed checkpoints whole layers (its export refuses selective recomputation): the search
    never picks selective for it, and asking for it is one line of bad input."""
    plan = planner.plan(**LLAMA70, tp=8, pp=4, target="deepspeed", top_k=3)
    assert {plan.config.recompute} | {a.config["recompute"] for a in plan.alternatives} <= {"none", "full"}
    with pytest.raises(InputError, match="deepspeed recomputes none or full, not recompute selective"):
        planner.plan(**LLAMA70, tp=8, pp=4, target="deepspeed", recompute="selective")
