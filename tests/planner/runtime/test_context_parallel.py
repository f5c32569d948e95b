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

from equality import check_all, RTOL, Job, Reference, compare, reference, results, run_world
from plan_helpers import gpt_spec, llama_spec, make_plan, write_llama_config
from planner.errors import InputError
from planner.runtime.context_parallel import check_context_parallel, local_positions, shard_sequence, variant

HERE = Path(__file__).parent

SHAPES: dict[int, dict[str, dict]] = {
    2: {"cp2": {"cp": 2}, "cp2_full": {"cp": 2, "recompute": "full"}, "cp2_selective": {"cp": 2, "recompute": "selective"}},
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


def test_two_process_cp_equals_one_process(models: dict[str, object], references: dict[str, Reference],
                                           tmp_path: Path) -> None:
    jobs = _jobs(models, SHAPES[2])
    run_world(2, jobs, tmp_path)
    check_all(tmp_path, jobs, references)


def test_four_process_cp_shapes_equal_one_process(models: dict[str, object], references: dict[str, Reference],
                                                  tmp_path: Path) -> None:
    jobs = _jobs({k: models[k] for k in ("llama", "preset")}, SHAPES[4])
    run_world(4, jobs, tmp_path)
    check_all(tmp_path, jobs, references)


TWIN_ATOL = 5e-5
"""Weights of the 16-rank twin: 1,024-token sums reduced in another order over 16 ranks leave roundoff on
near-zero gradient elements that AdamW normalises into moves of ~1e-5 (measured 1.1e-5 on one of 8,192
elements of one matrix); 5e-5 is 1.7 % of three steps of lr 1e-3. Losses keep ``equality.RTOL``."""

LONG_CONTEXT = ["--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "16",
                "--seq-len", "131072"]
"""The 128K-token Llama 3.1 8B request on two DGX H100 nodes."""


def twin_spec() -> object:
    """The ``llama3.1-8b`` preset's block scaled down with its 4 : 1 grouped-query ratio (16 heads, 4 KV
    heads, so that tp 4 splits whole KV heads), hidden 64, FFN 128, vocab 128, 4 layers, 1,024 positions."""
    from planner.intake.models.builder import decoder_lm
    from planner.intake.models.presets import build_preset

    block = build_preset("llama3.1-8b").layers[1].model_copy(update=dict(hidden_size=64, num_heads=16, num_kv_heads=4,
                                                                            head_dim=4, ffn_hidden_size=128))
    return decoder_lm("llama3.1-8b-twin", blocks=[block] * 4, vocab_size=128, tied_embeddings=False, max_seq_len=1024,
                      source="llama3.1-8b preset shape, scaled down")


def test_long_context_plan_and_its_twin(tmp_path: Path) -> None:
    """``meshplan plan`` for 128K tokens picks cp > 1 (with ``--cp 2..16`` and without), ``validate``
    accepts it, and a 4-layer twin with the plan's cp, tp and pp (dp 1 there already: 16 ranks) trains
    on sequences of 1,024 tokens like one process."""
    import json
    import subprocess
    import sys

    cli = str(HERE.parents[2] / "cli.py")
    meshes = []
    for extra in (["--cp", "2..16"], []):
        out = tmp_path / f"plan{len(meshes)}.json"
        subprocess.run([sys.executable, cli, "plan", *LONG_CONTEXT, *extra, "-o", str(out)], check=True, capture_output=True)
        subprocess.run([sys.executable, cli, "validate", str(out)], check=True, capture_output=True)
        meshes.append(json.loads(out.read_text())["mesh"])
    assert all(m["cp"] > 1 for m in meshes), meshes
    mesh = meshes[0]
    spec = twin_spec()
    cfg = dict(cp=mesh["cp"], tp=mesh["tp"], pp=mesh["pp"], sp=mesh["tp"] > 1, global_batch=2, seq_len=1024,
               micro_batch=1, zero=mesh["zero"])
    if mesh["pp"] > 1:
        cfg["schedule"] = "1f1b"
    job = Job("twin-long", spec, make_plan(spec, cfg).to_json())
    run_world(mesh["cp"] * mesh["tp"] * mesh["pp"], [job], tmp_path)
    ref = reference(spec, batch=2, seq=1024)
    losses, params = results(tmp_path, job.name)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref.losses), rtol=RTOL, atol=0)
    for name, want in ref.params.items():  # AdamW turns roundoff on near-zero gradients into up to ~lr / 100
        torch.testing.assert_close(params[name], want, rtol=RTOL, atol=TWIN_ATOL, msg=lambda m, n=name: f"{n}: {m}")
