"""Proof of ``planner.apply``: every plan shape trains exactly like the unsplit model.

Fourteen plan shapes on 2, 4 and 8 CPU gloo processes, for three models: a small Llama from a
``config.json`` (transformers), a small GPT of the ``gpt-1.7b`` preset's shape (the runtime's own
builder) and a traced custom ``nn.Module``; and selective recomputation under FSDP2 and under TP for
a small model of the ``llama3.1-8b`` preset's shape (``nn.RMSNorm``). Each trains three fp32 AdamW steps from the same seeded
weights on the same seeded batches; losses and final parameters must equal one-process training
(tolerances in ``equality.py``). A plan from ``meshplan plan`` on a four-"GPU" CPU cluster file is
applied as written, and a deliberately wrong split (the first stage boundary moved in the applied
module only) must fail the same comparison.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from equality import check_all, Job, Reference, compare, reference, results, run_world
from plan_helpers import gpt_spec, llama_spec, make_plan, write_llama_config

HERE = Path(__file__).parent
RECOMPUTE = ["none", "full", "selective", "none", "full", "none", "none"]
"""Per-layer recomputation for embedding, four blocks, norm, head: mixed."""

SHAPES: dict[int, dict[str, dict]] = {
    2: {
        "dp": {"dp": 2, "zero": 0, "micro_batch": 2},
        "fsdp": {"dp": 2, "zero": 3},
        "tp_sp": {"tp": 2, "sp": True},
        "pp_1f1b": {"pp": 2, "schedule": "1f1b"},
        "pp_zero_bubble": {"pp": 2, "schedule": "zb-h1"},
        "pp_uneven": {"pp": 2, "stage_layers": [2, 5]},
    },
    4: {
        "tp_x_dp": {"tp": 2, "dp": 2, "zero": 0, "sp": False},
        "fsdp_x_tp": {"tp": 2, "dp": 2, "zero": 3, "sp": True},
        "pp_interleaved": {"pp": 2, "vpp": 2, "dp": 2, "zero": 1, "schedule": "interleaved-1f1b"},
        "pp_x_tp": {"pp": 2, "tp": 2, "sp": True},
        "pp_x_fsdp": {"pp": 2, "dp": 2, "zero": 3},
        "recompute_mixed": {"tp": 2, "dp": 2, "zero": 1, "sp": True, "layer_recompute": RECOMPUTE},
        "pp4_gpipe": {"pp": 4, "schedule": "gpipe"},
    },
    8: {
        "pp_x_fsdp_x_tp": {"pp": 2, "dp": 2, "tp": 2, "zero": 3, "sp": True},
    },
}

RMSNORM_SHAPES = {
    "fsdp_selective": {"dp": 2, "zero": 3, "recompute": "selective"},
    "tp_sp_selective": {"tp": 2, "sp": True, "recompute": "selective"},
}
"""Selective recomputation of a block with ``nn.RMSNorm``, which mutates its own temporaries (the
``llama3.1-8b`` preset's shape, built by the runtime's ``DecoderLM``), under FSDP2 and under TP."""

CPU_CLUSTER = HERE / "data" / "laptop-cpu-4.json"
"""A cluster file of four CPU "GPUs" (the README's laptop example)."""


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    folder = tmp_path_factory.mktemp("llama")
    return {"llama": write_llama_config(folder), "gpt": gpt_spec(), "custom": f"{HERE / 'custom_model.py'}:build"}


@pytest.fixture(scope="module")
def references(models: dict[str, object]) -> dict[str, Reference]:
    return {name: reference(model) for name, model in {**models, "preset": llama_spec()}.items()}


def _jobs(models: dict[str, object], shapes: dict[str, dict]) -> list[Job]:
    jobs = []
    for model_name, model in models.items():
        spec = model if not isinstance(model, str) else None
        for shape, cfg in shapes.items():
            jobs.append(Job(f"{model_name}-{shape}", model, make_plan(model, cfg, spec=spec).to_json()))
    return jobs


@pytest.fixture(scope="module")
def world2(models: dict[str, object], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Job]]:
    """Two processes: the 2-rank shapes, and the negative job (stage boundary moved in the module only)."""
    out = tmp_path_factory.mktemp("world2")
    llama = models["llama"]
    wrong = Job("llama-wrong_split", llama, make_plan(llama, {"pp": 2}).to_json(), corrupt=True)
    jobs = _jobs(models, SHAPES[2]) + _jobs({"preset": llama_spec()}, RMSNORM_SHAPES)
    run_world(2, jobs + [wrong], out)
    return out, jobs


def test_two_process_shapes_equal_one_process(world2: tuple[Path, list[Job]], references: dict[str, Reference]) -> None:
    check_all(*world2, references)


def test_moved_stage_boundary_fails_the_check(world2: tuple[Path, list[Job]], references: dict[str, Reference]) -> None:
    out, _ = world2
    with pytest.raises(AssertionError):
        compare(references["llama"], results(out, "llama-wrong_split"))


def test_four_process_shapes_and_a_searched_plan(models: dict[str, object], references: dict[str, Reference],
                                                 tmp_path: Path) -> None:
    cluster = CPU_CLUSTER
    plan_file = tmp_path / "plan.json"
    cmd = [sys.executable, str(HERE.parents[2] / "cli.py"), "plan", "--model", str(models["llama"]), "--cluster", str(cluster),
           "--gpus", "4", "--global-batch", "8", "--seq-len", "16", "-o", str(plan_file)]
    subprocess.run(cmd, check=True, capture_output=True, cwd=HERE.parents[2])
    searched = Job("llama-searched", models["llama"], plan_file.read_text())
    jobs = _jobs(models, SHAPES[4]) + [searched]
    run_world(4, jobs, tmp_path)
    check_all(tmp_path, jobs, references)


def test_eight_process_3d_shape(models: dict[str, object], references: dict[str, Reference], tmp_path: Path) -> None:
    jobs = _jobs(models, SHAPES[8])
    run_world(8, jobs, tmp_path)
    check_all(tmp_path, jobs, references)
