"""Megatron-LM export: golden launchers, the argv round trip, the layout grammar, refusals."""

from __future__ import annotations

import argparse
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

import planner
from planner.outputs.export import engine_export, text_of
from planner.plans.engines.common import UnsupportedPlanError
from planner.plans.engines.megatron import MegatronExport
from planner.plans.named_model import plan_model

LLAMA70B = dict(model="llama3.1-70b", tp=2, pp=4, cp=2, dp=4, sp=True, zero=1, global_batch=512, seq_len=8192, micro_batch=1)


def unchecked(plan, target: str):
    """The exporter alone (``engine_export``): these tests check its mapping on fixed configurations,
    some over an H100's memory, which ``export`` refuses before exporting (tested in test_api.py)."""
    return engine_export(plan, target, plan_model(plan))


def block_recompute(stage_layers: tuple[int, ...], n: int, layers: int = 83, first_block: int = 1, last_block: int = 80) -> tuple[str, ...]:
    """Full recomputation of the first ``n`` blocks of every chunk, none elsewhere."""
    modes, start = ["none"] * layers, 0
    for size in stage_layers:
        blocks = [i for i in range(start, start + size) if first_block <= i <= last_block]
        for i in blocks[:n]:
            modes[i] = "full"
        start += size
    return tuple(modes)


def parser() -> argparse.ArgumentParser:
    """The flags under test, spelled as Megatron-LM spells them (ecosystem-notes B1)."""
    p = argparse.ArgumentParser()
    for flag in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
                 "--expert-model-parallel-size", "--micro-batch-size", "--global-batch-size", "--seq-length",
                 "--num-layers", "--num-virtual-stages-per-pipeline-rank", "--recompute-num-layers"):
        p.add_argument(flag, type=int)
    for flag in ("--pipeline-model-parallel-layout", "--recompute-granularity", "--recompute-method", "--data-parallel-sharding-strategy"):
        p.add_argument(flag)
    for flag in ("--sequence-parallel", "--use-distributed-optimizer", "--use-megatron-fsdp"):
        p.add_argument(flag, action="store_true")
    return p


def parse_layout(layout: str) -> list[list[str]]:
    """Megatron-LM's ``PipelineParallelLayerLayout.parse_str_to_list`` grammar, reimplemented."""
    text = layout.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        text = re.sub(pattern, lambda m: m.group(1) * int(m.group(2)), text)
    return [list(stage) for stage in text.split("|")]


def check_round_trip(plan, argv: list[str]) -> argparse.Namespace:
    args, _ = parser().parse_known_args(argv)
    m, s = plan.mesh, plan.schedule
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.context_parallel_size) == (m.tp, m.pp, m.cp)
    assert (args.micro_batch_size, args.global_batch_size, args.seq_length) == (s.micro_batch, s.global_batch, plan.request.seq_len)
    assert plan.request.gpus // (args.tensor_model_parallel_size * args.pipeline_model_parallel_size * args.context_parallel_size) == m.dp
    assert args.expert_model_parallel_size == m.ep
    return args


def test_golden_layout_and_block_recompute(plan_of, golden) -> None:
    split = (20, 21, 21, 21)
    plan = plan_of(**LLAMA70B, stage_layers=split, layer_recompute=block_recompute(split, 2))
    golden("megatron_llama70b_layout.sh", text_of(unchecked(plan, "megatron"), "megatron"))
    golden("megatron_llama70b_layout.json", text_of(unchecked(plan, "megatron"), "megatron", "json"))


def test_golden_interleaved_even_split(plan_of, golden) -> None:
    plan = plan_of(model="gpt3-175b", cluster="dgx-a100", tp=8, pp=8, dp=2, vpp=4, schedule="interleaved-1f1b", sp=True, zero=1,
                   recompute="selective", global_batch=256, seq_len=2048, micro_batch=1)
    golden("megatron_gpt175b_vpp.sh", text_of(unchecked(plan, "megatron"), "megatron"))


def test_round_trip_of_fixture_plan(plan_of) -> None:
    split = (20, 21, 21, 21)
    plan = plan_of(**LLAMA70B, stage_layers=split, layer_recompute=block_recompute(split, 2))
    args = check_round_trip(plan, unchecked(plan, "megatron").argv())
    assert args.sequence_parallel and args.use_distributed_optimizer
    assert (args.recompute_granularity, args.recompute_method, args.recompute_num_layers) == ("full", "block", 2)
    stages = parse_layout(args.pipeline_model_parallel_layout)
    assert [s.count("t") for s in stages] == [19, 21, 21, 19]
    assert stages[0][0] == "E" and stages[-1][-1] == "L" and sum(s.count("t") for s in stages) == args.num_layers == 80


def test_round_trip_of_searched_plan() -> None:
    """Acceptance (issue 5): Llama 3.1 70B on 64 dgx-h100 GPUs, --target megatron."""
    from planner.plans.build import plan as make

    plan = make(model="llama3.1-70b", cluster="dgx-h100", gpus=64, global_batch=512, seq_len=8192, target="megatron")
    args = check_round_trip(plan, planner.export(plan, "megatron").argv())  # a searched plan passes export's check
    if args.pipeline_model_parallel_layout is not None:
        stages = parse_layout(args.pipeline_model_parallel_layout)
        assert len(stages) == plan.mesh.pp * plan.schedule.virtual_stages
        assert [s.count("t") for s in stages] == [sum(1 for i in st.layers if plan.model.layer_names[i] == "block") for st in sorted(plan.stages, key=lambda x: x.index)]


def test_grouped_arguments_partition_the_flat_argv(plan_of) -> None:
    plan = plan_of(**LLAMA70B)
    groups = dict(unchecked(plan, "megatron").groups)
    assert list(groups) == ["GPT_MODEL_ARGS", "TRAINING_ARGS", "MODEL_PARALLEL_ARGS"]
    assert [t for g in groups.values() for t in g] == unchecked(plan, "megatron").argv()
    assert "--seq-length" in groups["GPT_MODEL_ARGS"] and "--micro-batch-size" in groups["TRAINING_ARGS"]
    assert "--tensor-model-parallel-size" in groups["MODEL_PARALLEL_ARGS"]


def test_even_split_uses_virtual_stages_never_with_a_layout(plan_of) -> None:
    plan = plan_of(model="llama3.1-8b", tp=1, pp=4, dp=4, vpp=2, schedule="interleaved-1f1b", zero=1, global_batch=64, seq_len=4096)
    argv = unchecked(plan, "megatron").argv()
    assert argv[argv.index("--num-virtual-stages-per-pipeline-rank") + 1] == "2"
    assert "--pipeline-model-parallel-layout" not in argv


def test_uneven_split_with_interleaving_is_a_layout_of_pp_times_vpp_stages(plan_of) -> None:
    split = (4, 4, 4, 4, 4, 4, 4, 7)  # 35 layers: embedding, 32 blocks, norm, head
    plan = plan_of(model="llama3.1-8b", tp=1, pp=4, dp=4, vpp=2, schedule="interleaved-1f1b", zero=1, global_batch=64, seq_len=4096, stage_layers=split)
    args, _ = parser().parse_known_args(unchecked(plan, "megatron").argv())
    stages = parse_layout(args.pipeline_model_parallel_layout)
    assert len(stages) == 8 and args.num_virtual_stages_per_pipeline_rank is None
    assert [s.count("t") for s in stages] == [3, 4, 4, 4, 4, 4, 4, 5]


@pytest.mark.parametrize(("recompute", "expected"), [
    ("none", []),
    ("selective", ["--recompute-granularity", "selective", "--recompute-modules", "core_attn"]),
    ("full", ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]),
])
def test_uniform_recompute(plan_of, recompute: str, expected: list[str]) -> None:
    plan = plan_of(tp=2, pp=2, dp=4, sp=True, zero=1, global_batch=64, seq_len=4096, recompute=recompute)
    argv = unchecked(plan, "megatron").argv()
    got = argv[argv.index("--recompute-granularity"):][:len(expected)] if expected else [t for t in argv if t.startswith("--recompute")]
    assert got == expected


@pytest.mark.parametrize(("zero", "flags", "absent"), [
    (0, [], ["--use-distributed-optimizer", "--use-megatron-fsdp"]),
    (1, ["--use-distributed-optimizer"], ["--use-megatron-fsdp"]),
    (2, ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads"], []),
    (3, ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads_params", "--ckpt-format", "fsdp_dtensor"], []),
])
def test_zero_stages(plan_of, zero: int, flags: list[str], absent: list[str]) -> None:
    result = unchecked(plan_of(tp=2, dp=8, sp=True, zero=zero, global_batch=64, seq_len=4096), "megatron")
    assert isinstance(result, MegatronExport)
    argv = result.argv()
    assert all(f in argv for f in flags) and not any(f in argv for f in absent)
    # Megatron-LM asserts CUDA_DEVICE_MAX_CONNECTIONS=1 for TP, and != 1 for Megatron FSDP.
    assert result.env == ({} if zero >= 2 else {"CUDA_DEVICE_MAX_CONNECTIONS": "1"})


def test_moe_arguments(plan_of) -> None:
    argv = unchecked(plan_of(model="mixtral-8x7b", tp=1, pp=2, dp=16, ep=8, zero=1, global_batch=256, seq_len=4096), "megatron").argv()
    args, _ = parser().parse_known_args(argv)
    assert args.expert_model_parallel_size == 8
    assert argv[argv.index("--num-experts") + 1] == "8" and argv[argv.index("--moe-router-topk") + 1] == "2"


def test_shell_snippet_passes_exactly_the_argv(plan_of, tmp_path: Path) -> None:
    split = (20, 21, 21, 21)
    plan = plan_of(**LLAMA70B, stage_layers=split, layer_recompute=block_recompute(split, 2))
    fake = tmp_path / "torchrun"
    fake.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    script = tmp_path / "launch.sh"
    script.write_text(text_of(unchecked(plan, "megatron"), "megatron"))
    out = subprocess.run(["bash", str(script), "--mock-data"], capture_output=True, text=True, check=True,
                         env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}).stdout.splitlines()
    tail = out[out.index("pretrain_gpt.py") + 1:]
    assert tail == unchecked(plan, "megatron").argv() + ["--mock-data"]
    assert out[:4] == ["--nproc_per_node", "8", "--nnodes", "8"]


def test_refuses_a_schedule_megatron_does_not_run(plan_of) -> None:
    plan = plan_of(tp=2, pp=2, dp=4, sp=True, zero=1, global_batch=64, seq_len=4096, schedule="gpipe")
    with pytest.raises(UnsupportedPlanError, match="schedule.name") as err:
        unchecked(plan, "megatron").argv()
    assert err.value.field == "schedule.name"


@pytest.mark.parametrize("zero", [2, 3])
def test_refuses_megatron_fsdp_with_pipelining(plan_of, zero: int) -> None:
    """The validator's megatron rule, held by the exporter too: a native plan with ZeRO-2/3 and PP
    has no Megatron-LM launcher (Megatron FSDP runs without pipelining)."""
    plan = plan_of(tp=2, pp=2, dp=4, sp=True, zero=zero, global_batch=64, seq_len=4096)
    with pytest.raises(UnsupportedPlanError, match="mesh.zero") as err:
        unchecked(plan, "megatron").argv()
    assert "without pipelining" in str(err.value)
    assert "--use-megatron-fsdp" in unchecked(plan_of(tp=2, pp=1, dp=8, sp=True, zero=zero, global_batch=64, seq_len=4096), "megatron").argv()


def test_refuses_recompute_that_is_not_the_first_blocks_of_every_chunk(plan_of) -> None:
    modes = ["none"] * 35
    modes[5] = "full"  # the fifth block of chunk 0, not its first
    plan = plan_of(tp=1, pp=2, dp=8, zero=1, global_batch=64, seq_len=4096, layer_recompute=tuple(modes))
    with pytest.raises(UnsupportedPlanError, match=r"stages\[0\]\.layer_recompute"):
        unchecked(plan, "megatron").argv()


def test_refuses_different_block_counts_per_chunk(plan_of) -> None:
    modes = ["none"] * 35
    modes[1] = modes[2] = "full"  # chunk 0: two blocks
    modes[17] = "full"            # chunk 1: one block
    plan = plan_of(tp=1, pp=2, dp=8, zero=1, global_batch=64, seq_len=4096, stage_layers=(17, 18), layer_recompute=tuple(modes))
    with pytest.raises(UnsupportedPlanError, match=r"stages\[1\]\.layer_recompute"):
        unchecked(plan, "megatron").argv()


def test_refuses_final_norm_and_head_on_different_stages(plan_of) -> None:
    plan = plan_of(tp=1, pp=2, dp=8, zero=1, global_batch=64, seq_len=4096, stage_layers=(34, 1))
    with pytest.raises(UnsupportedPlanError, match=r"stages\[0\]\.layers"):
        unchecked(plan, "megatron").argv()
