"""``meshplan run`` end to end under torchrun: a 4-rank CPU plan of a tiny Llama, and refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from equality import BF16_RTOL, SEED, reference
from plan_helpers import gpt_spec, make_plan, write_llama_config
from planner.runtime.precision import cpu_has_fast_bf16
from planner.runtime.record import RunRecord

ROOT = Path(__file__).resolve().parents[3]
CLI = str(ROOT / "cli.py")


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=600)


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("meshplan: error:")]


DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The README's laptop example: plan the tiny Llama on four CPU "GPUs" with ``meshplan plan``."""
    folder = tmp_path_factory.mktemp("run")
    config = write_llama_config(folder)
    done = _run(sys.executable, CLI, "plan", "--model", config, "--cluster", str(DATA / "laptop-cpu-4.json"), "--gpus", "4",
                "--global-batch", "8", "--seq-len", "16", "-o", "plan.json", cwd=folder)
    assert done.returncode == 0, done.stderr
    (folder / "one_rank.json").write_text(make_plan(config, {}).to_json())
    done = _run(sys.executable, CLI, "estimate", "--model", config, "--cluster", str(DATA / "laptop-cpu-4.json"), "--gpus", "1",
                "--global-batch", "4", "--seq-len", "16", "--tp", "1", "--pp", "1", "--micro-batch", "1",
                "-o", "accumulate.json", cwd=folder)
    assert done.returncode == 0, done.stderr
    (folder / "gpt_plan.json").write_text(make_plan(gpt_spec(), {"tp": 2, "dp": 2}, spec=gpt_spec()).to_json())
    return folder, config


def test_torchrun_prints_and_writes_the_run_record(setup: tuple[Path, str]) -> None:
    folder, config = setup
    done = _run(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4", CLI, "run",
                "plan.json", "--model", config, "--steps", "3", "--warmup", "1", "--seed", str(SEED), "-o", "run.json", cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "step time (s)" in done.stdout and "loss per step" in done.stdout
    record = RunRecord.model_validate_json((folder / "run.json").read_text())
    assert record.world_size == 4 and record.env.backend == "gloo" and len(record.memory) == 4
    assert record.step_time.median_s > 0 and record.step_time_s.predicted == record.plan.estimate["step_time_s"]
    assert all(m.peak_allocated_gib > 0 and m.peak_reserved_gib for m in record.memory)
    # the seed fixes the loss curve: the unsplit model trained in one process as the runtime trains
    # (bf16 compute, fp32 master weights where this CPU runs bf16; the tolerance's reasons at BF16_RTOL)
    bf16 = cpu_has_fast_bf16()
    assert record.training is not None and record.training.master_dtype == "float32"
    assert record.training.compute_dtype == ("bfloat16" if bf16 else "float32")
    assert record.losses == pytest.approx(reference(config, mixed=bf16).losses, rel=BF16_RTOL)


def test_a_plan_for_another_model_exits_2_with_one_line_before_any_worker(setup: tuple[Path, str]) -> None:
    folder, config = setup
    done = _run(sys.executable, CLI, "run", "gpt_plan.json", "--model", config, "--nproc-per-node", "4", cwd=folder)
    assert done.returncode == 2
    assert len(_errors(done.stderr)) == 1
    assert done.stderr.count("\n") == 1 and "parameters but the plan's model 'tiny-gpt'" in done.stderr
    assert done.stdout == ""


def test_under_torchrun_a_plan_that_does_not_fit_is_one_line(setup: tuple[Path, str]) -> None:
    folder, config = setup
    done = _run(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", CLI, "run",
                "plan.json", "--model", config, cwd=folder)
    assert done.returncode != 0  # torchrun reports a failed worker as 1
    assert _errors(done.stderr) == ["meshplan: error: the plan has 4 ranks but torchrun started 2; use --nproc-per-node 4"]
    assert json.loads((folder / "plan.json").read_text())["request"]["gpus"] == 4


def test_a_one_rank_plan_runs_in_process_with_torchs_memory_tracker(setup: tuple[Path, str]) -> None:
    folder, config = setup
    done = _run(sys.executable, CLI, "run", "one_rank.json", "--model", config, "--steps", "2", "--warmup", "1", "--json", cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""  # no torch.distributed warnings: meshplan run prints only its own lines
    record = RunRecord.model_validate_json(done.stdout)
    (memory,) = record.memory
    assert "MemTracker" in memory.source and memory.error is not None
    assert record.training is not None and record.training.startup_s is not None and record.training.startup_s > 0
    assert "is_causal" in record.training.attention or "sdpa" in record.training.attention
    # at least the fp32 weights, gradients and two AdamW moments of the 49,440 parameters
    assert memory.peak_allocated_gib * 2**30 >= 4 * 4 * record.model.params


def test_a_one_rank_plan_with_gradient_accumulation_runs(setup: tuple[Path, str]) -> None:
    """Four micro-batches per step (MemTracker refuses a module called once per micro-batch): the run
    completes and reports the parameter, gradient and optimizer-state bytes instead."""
    folder, config = setup
    done = _run(sys.executable, CLI, "run", "accumulate.json", "--model", config, "--steps", "2", "--warmup", "1", "--json", cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    record = RunRecord.model_validate_json(done.stdout)
    (memory,) = record.memory
    assert "micro-batch" in memory.source and len(record.losses) == 2
    assert memory.peak_allocated_gib * 2**30 >= 4 * 4 * record.model.params


@pytest.mark.parametrize("args, message", [
    (["plan.json", "-o", "missing/run.json"], "-o missing/run.json: cannot write it: directory missing does not exist"),
    (["plan.json", "--steps", "2", "--warmup", "2"], "run: --warmup 2 must be at least 0 and less than --steps 2"),
    (["nope.json"], "cannot read plan nope.json"),
])
def test_bad_arguments_exit_2_with_one_line(setup: tuple[Path, str], args: list[str], message: str) -> None:
    folder, _ = setup
    done = _run(sys.executable, CLI, "run", *args, cwd=folder)
    assert done.returncode == 2 and done.stdout == ""
    assert _errors(done.stderr) == [line for line in done.stderr.splitlines()] and message in done.stderr
