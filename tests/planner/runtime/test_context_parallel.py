"""Context parallelism in the native runtime (``planner.runtime.context_parallel``): cp plans train
like one process.

The layout is checked directly (chunks ``i`` and ``2 cp - 1 - i``, positions with their tokens); then
cp plans on 2 and 4 CPU gloo processes (the all-gather-KV variant) train three fp32 AdamW steps of four
models (a Hugging Face Llama with GQA, the runtime's own GPT with a learned position table, the
runtime's own Llama-shaped decoder with rotary angles, and a traced custom module) from the same
seeded weights on the same seeded batches as one process: losses and final parameters must agree
(tolerances in ``equality.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from equality import Job, Reference, compare, reference, results, run_world
from plan_helpers import gpt_spec, llama_spec, make_plan, write_llama_config
from planner.errors import InputError
from planner.runtime.context_parallel import check_context_parallel, local_positions, shard_sequence, variant

HERE = Path(__file__).parent

SHAPES: dict[int, dict[str, dict]] = {
    2: {"cp2": {"cp": 2}},
    4: {
        "cp4": {"cp": 4},
        "cp2_x_fsdp": {"cp": 2, "dp": 2, "zero": 3},
        "cp2_x_tp_sp": {"cp": 2, "tp": 2, "sp": True},
        "cp2_x_pp": {"cp": 2, "pp": 2, "schedule": "1f1b"},
    },
}


def test_each_rank_holds_chunk_i_and_its_mirror() -> None:
    seq = torch.arange(16).unsqueeze(0)
    assert shard_sequence(seq, 2, 0).tolist() == [[0, 1, 2, 3, 12, 13, 14, 15]]
    assert shard_sequence(seq, 2, 1).tolist() == [[4, 5, 6, 7, 8, 9, 10, 11]]
    for rank in range(4):
        assert torch.equal(local_positions(4, 4, rank, "cpu"), shard_sequence(seq, 4, rank)[0])
    assert sorted(torch.cat([shard_sequence(seq, 4, r)[0] for r in range(4)]).tolist()) == list(range(16))


def test_variant_follows_the_device() -> None:
    assert variant("cuda") == "torch" and variant("cpu") == "allgather"


def test_unshardable_sequences_are_refused() -> None:
    check_context_parallel(2, 16, 2, True, True)
    with pytest.raises(InputError, match="seq 10 is not a multiple of 4"):
        check_context_parallel(2, 10, 1, False, True)
    check_context_parallel(2, 24, 4, True, True)
    with pytest.raises(InputError, match="12 tokens are not divisible by tp 8"):
        check_context_parallel(2, 24, 8, True, True)
    with pytest.raises(InputError, match="reads none"):
        check_context_parallel(2, 16, 1, False, False)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    folder = tmp_path_factory.mktemp("llama")
    return {"llama": write_llama_config(folder), "gpt": gpt_spec(), "preset": llama_spec(),
            "custom": f"{HERE / 'custom_model.py'}:build"}


@pytest.fixture(scope="module")
def references(models: dict[str, object]) -> dict[str, Reference]:
    return {name: reference(model) for name, model in models.items()}


def _jobs(models: dict[str, object], shapes: dict[str, dict]) -> list[Job]:
    return [Job(f"{name}-{shape}", model, make_plan(model, cfg, spec=None if isinstance(model, str) else model).to_json())
            for name, model in models.items() for shape, cfg in shapes.items()]


def _check(out: Path, jobs: list[Job], refs: dict[str, Reference]) -> None:
    failures = []
    for job in jobs:
        try:
            compare(refs[job.name.split("-")[0]], results(out, job.name))
        except AssertionError as err:
            failures.append(f"{job.name}: {str(err).splitlines()[0]}")
    assert not failures, "\n".join(failures)


def test_two_process_cp_equals_one_process(models: dict[str, object], references: dict[str, Reference],
                                           tmp_path: Path) -> None:
    jobs = _jobs(models, SHAPES[2])
    run_world(2, jobs, tmp_path)
    _check(tmp_path, jobs, references)


def test_four_process_cp_shapes_equal_one_process(models: dict[str, object], references: dict[str, Reference],
                                                  tmp_path: Path) -> None:
    jobs = _jobs({k: models[k] for k in ("llama", "preset")}, SHAPES[4])
    run_world(4, jobs, tmp_path)
    _check(tmp_path, jobs, references)
