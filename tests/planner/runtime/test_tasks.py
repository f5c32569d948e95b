"""``planner.runtime.tasks``: what a model is trained on (tokens, or features and regression targets),
and ``meshplan run`` / ``check-memory`` of a ResNet-style CNN without a sequence dimension."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import planner
from differential import reference_losses
from equality import BF16_RTOL
from planner.errors import InputError
from planner.runtime.memcheck.check import check_memory
from planner.runtime.models import build_model
from planner.runtime.record import RunRecord
from planner.runtime.tasks import Task, regression_loss, split_rows, task_for
from plan_helpers import BATCH, SEQ, write_llama_config

HERE = Path(__file__).parent
CNN = f"{HERE / 'cnn_model.py'}:build"
CLI = str(HERE.parents[2] / "cli.py")


def test_a_token_model_gets_its_vocabulary_and_shifted_tokens(tmp_path: Path) -> None:
    config = write_llama_config(tmp_path)
    task = task_for(config, build_model(config), SEQ)
    assert task == Task(vocab=128)
    batch = task.batch(7, 0, BATCH, SEQ)
    assert batch.shape == (BATCH, SEQ + 1) and int(batch.max()) < 128
    inputs, labels = split_rows(batch, 2, 4, torch.device("cpu"))
    assert torch.equal(inputs, batch[2:4, :-1]) and torch.equal(labels, batch[2:4, 1:])


def test_a_cnn_gets_images_and_targets_of_its_output_shape() -> None:
    task = task_for(CNN, build_model(CNN), SEQ)
    assert task == Task(vocab=None, sample=(3, 8, 8), target=(10,))
    inputs, targets = task.batch(7, 1, BATCH, SEQ)
    assert inputs.shape == (BATCH, 3, 8, 8) and targets.shape == (BATCH, 10)
    again = task.batch(7, 1, BATCH, SEQ)
    assert torch.equal(inputs, again[0]) and not torch.equal(inputs, task.batch(7, 2, BATCH, SEQ)[0])
    # the mean of equal shards' means is the batch mean: any dp / micro-batch split gives the same loss
    out = torch.randn(BATCH, 10)
    halves = (regression_loss(out[:4], targets[:4]) + regression_loss(out[4:], targets[4:])) / 2
    assert torch.allclose(halves, regression_loss(out, targets))


def test_a_model_without_tokens_needs_its_input_shape(tmp_path: Path) -> None:
    bare = tmp_path / "bare.py"
    bare.write_text("from torch import nn\n\ndef build():\n    return nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))\n")
    arg = f"{bare}:build"
    with pytest.raises(InputError, match="must return \\(module, make_inputs\\)"):
        task_for(arg, build_model(arg), SEQ)


def test_a_model_whose_forward_is_not_the_chain_of_its_layers_is_refused(tmp_path: Path) -> None:
    zoo = HERE.parent / "intake" / "trace" / "corpus" / "zoo_models.py"
    arg = f"{zoo}:resnet50_small"  # pooling and flatten run between its last block and its classifier
    with pytest.raises(InputError, match="chain of its layers"):
        task_for(arg, build_model(arg), SEQ)


def test_meshplan_run_trains_the_cnn_like_one_process_and_check_memory_measures_it(tmp_path: Path) -> None:
    plan = planner.config_plan(model=CNN, cluster="dgx-a100", gpus=2, global_batch=BATCH, seq_len=SEQ, tp=1, pp=2,
                               micro_batch=2, zero=0, schedule="1f1b", recompute="selective")
    (tmp_path / "plan.json").write_text(plan.to_json())
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", CLI, "run",
                           "plan.json", "--model", CNN, "--steps", "3", "--warmup", "1", "--seed", "1234", "-o", "run.json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    record = RunRecord.model_validate_json((tmp_path / "run.json").read_text())
    assert record.losses == pytest.approx(reference_losses(CNN), rel=BF16_RTOL)  # bf16 as the runtime: equality.BF16_RTOL
    assert any("mean squared error" in note for note in record.notes)
    memory = check_memory(plan, model=CNN)
    assert [r.pp_rank for r in memory.ranks] == [0, 1] and all(r.measured_peak_gib > 0 for r in memory.ranks)
