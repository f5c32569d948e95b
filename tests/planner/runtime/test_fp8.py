"""``precision fp8``: the blocks' linear layers become torchao Float8 linears; without a GPU that trains
Float8, ``meshplan run`` refuses the plan with one line (exit 2) and never runs it in bf16."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from torch import nn

from plan_helpers import write_llama_config

CLI = str(Path(__file__).resolve().parents[3] / "cli.py")


def test_convert_blocks_swaps_the_blocks_linears_only(tmp_path: Path) -> None:
    pytest.importorskip("torchao.float8")
    from torchao.float8.float8_linear import Float8Linear

    from planner.runtime.fp8 import convert_blocks
    from planner.runtime.layers import map_layers
    from planner.runtime.models import build_model
    from plan_helpers import make_plan

    config = write_llama_config(tmp_path)
    module = build_model(config)
    lmap = map_layers(module, make_plan(config, {}))
    blocks = [u.path for u in lmap.units if u.kind == "block"]
    linears = sum(isinstance(m, nn.Linear) for p in blocks for m in module.get_submodule(p).modules())
    assert convert_blocks(module, blocks) == linears == 4 * 7  # q, k, v, o, gate, up, down in each of 4 blocks
    assert sum(isinstance(m, Float8Linear) for m in module.modules()) == linears
    assert not isinstance(module.lm_head, Float8Linear)  # the output layer stays bf16, as the cost model prices


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_an_fp8_plan_without_a_float8_gpu_exits_2_with_one_line(tmp_path: Path) -> None:
    config = write_llama_config(tmp_path)
    done = _cli("estimate", "--model", config, "--cluster", "dgx-h100", "--gpus", "1", "--global-batch", "4", "--seq-len", "16",
                "--tp", "1", "--pp", "1", "--micro-batch", "4", "--precision", "fp8", "-o", "fp8.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = _cli("run", "fp8.json", "--model", config, "--device", "cpu", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "precision fp8: Float8 training needs a CUDA GPU" in done.stderr
    plan = json.loads((tmp_path / "fp8.json").read_text())
    plan["cluster"]["gpu"]["peak_fp8_tflops"] = None  # an edited plan: fp8 on a GPU without FP8 tensor cores
    (tmp_path / "edited.json").write_text(json.dumps(plan))
    done = _cli("validate", "edited.json", cwd=tmp_path)
    assert done.returncode == 2 and "precision fp8: GPU h100-sxm has no FP8 tensor cores" in done.stderr
