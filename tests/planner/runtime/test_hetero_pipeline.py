"""Heterogeneous replicas that pipeline (issue 22), on 4 CPU gloo ranks: each replica its own stage
split and share, every layer's gradient the weighted mean over the replicas, the one-process run's
losses and weights, replicas equal to each other, and an injected slowdown per rank."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import hetero_pipeline_worker as w
import planner
from equality import RTOL, reference
from plan_helpers import LLAMA_CONFIG, make_plan
from planner.errors import InputError
from planner.plans.schema import Plan
from planner.runtime.hetero_layout import rank_roles, sync_sets
from planner.runtime.record import RunRecord

CLI = str(Path(__file__).resolve().parents[3] / "cli.py")

DATA = Path(__file__).parent / "data"
SHAPE = {"hidden_size": 64, "intermediate_size": 128}
"""A tiny Llama wide enough that the cost model gives a fast GPU more layers than a slow one."""
GPT2_CONFIG = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 4,
               "n_positions": 64, "vocab_size": 128, "bos_token_id": 0, "eos_token_id": 0, "tie_word_embeddings": True,
               "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
"""A tiny GPT-2 whose head is tied to its token table (learned positions), without dropout."""
TIED = {"lm_head.weight": "transformer.wte.weight"}
"""The head's untied copy on a pipelined rank, and the table it must stay equal to."""
SLOW = {3: 0.5}
PARAM_ATOL = 1e-4
"""Weights against the one-process run's: a tenth of one AdamW step (lr 1e-3). The weighted mean of
gradients (weights D m_r / M) rounds differently from one backward over the whole batch, and AdamW
divides a near-zero gradient element's roundoff by its own root (one element of 8192 moved 1.4e-5)."""


def hetero_plan(config: str, tp: int = 1, pp: int = 2) -> Plan:
    """``meshplan plan --model config --cluster laptop-cpu-4.json --slow 3=0.5 --gpus 4 --global-batch 8
    --seq-len 16 --tp TP --pp PP --micro-batch 1``: two pp-2 replicas at tp 1."""
    return planner.plan(model=config, cluster=str(DATA / "laptop-cpu-4.json"), slow="3=0.5", gpus=4, global_batch=8,
                        seq_len=16, tp=tp, pp=pp, micro_batch=1, top_k=0)


def mixed_plan(plan: Plan) -> Plan:
    """``plan`` with its second replica replaced by two whole-model replicas (GPUs 2 and 3): one pp-2
    replica of 4 micro-batches beside whole models of 3 and 1 (the schema holds such a mix; the search
    gives every replica of a plan one depth)."""
    info = plan.hetero
    assert info is not None
    first, second = info.replicas
    whole = [second.model_copy(update={"index": i + 1, "micro_batches": m, "stages": [
        second.stages[0].model_copy(update={"layers": list(range(plan.model.num_layers)), "devices": [gpu]})]})
        for i, (m, gpu) in enumerate(((3, 2), (1, 3)))]
    replicas = [first.model_copy(update={"micro_batches": 4}), *whole]
    return plan.model_copy(update={"hetero": info.model_copy(update={"replicas": replicas})})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("hpipe")
    config = folder / "config.json"
    config.write_text(json.dumps({**LLAMA_CONFIG, **SHAPE}))
    plan = hetero_plan(str(config))
    gpt2 = folder / "gpt2.json"
    gpt2.write_text(json.dumps(GPT2_CONFIG))
    uniform = make_plan(str(config), {"pp": 2, "dp": 2}, cluster=str(DATA / "laptop-cpu-4.json"))
    jobs = [("split", str(config), plan.to_json(), SLOW), ("mixed", str(config), mixed_plan(plan).to_json(), {}),
            ("uniform", str(config), uniform.to_json(), {1: 0.5}), ("tied", str(gpt2), hetero_plan(str(gpt2)).to_json(), {}),
            ("tp_pipe", str(config), hetero_plan(str(config), tp=2).to_json(), {}),
            ("tp_shares", str(config), hetero_plan(str(config), tp=2, pp=1).to_json(), {})]
    w.run_world(4, jobs, folder)
    return {"folder": folder, "config": str(config), "plan": plan, "reference": reference(str(config)),
            "tp_pipe_plan": jobs[4][2], "tp_shares_plan": jobs[5][2],
            "reference_tied": reference(str(gpt2)), **{name: w.results(folder, name, 4) for name, *_ in jobs}}


def test_the_search_gives_two_pipelines_with_different_splits_and_uneven_shares(world: dict) -> None:
    replicas = world["plan"].hetero.replicas
    assert [len(r.stages) for r in replicas] == [2, 2]
    assert len({tuple(len(s.layers) for s in r.stages) for r in replicas}) == 2
    assert len({r.micro_batches for r in replicas}) == 2


@pytest.mark.parametrize("job", ["split", "mixed", "uniform", "tied", "tp_pipe", "tp_shares"])
def test_every_replica_trains_exactly_like_one_process(world: dict, job: str) -> None:
    ranks, ref = world[job], world["reference_tied" if job == "tied" else "reference"]
    assert ranks[0]["losses"] == pytest.approx(ref.losses, rel=RTOL)
    for replica in sorted({r["replica"] for r in ranks}):
        params = {n: p for r in ranks if r["replica"] == replica for n, p in r["params"].items()}
        for copy, table in TIED.items():
            if job == "tied":
                assert torch.equal(params.pop(copy), params[table])  # both copies of the tied weight stay equal
        assert sorted(params) == sorted(ref.params)
        for name, want in ref.params.items():
            torch.testing.assert_close(params[name], want, rtol=RTOL, atol=PARAM_ATOL, msg=lambda m, n=name: f"{n}: {m}")
    assert all(r["losses"] == ranks[0]["losses"] for r in ranks)  # every rank returns the batch's mean loss


@pytest.mark.parametrize("job", ["split", "mixed", "uniform", "tied", "tp_shares"])
def test_every_replicas_copy_of_a_layer_is_equal(world: dict, job: str) -> None:
    copies: dict[str, list[torch.Tensor]] = {}
    for r in world[job]:
        if r["tp_rank"]:
            continue  # the stage's tp ranks saved the same full tensors
        for n, p in r["params"].items():
            copies.setdefault(n, []).append(p)
    replicas = len({r["replica"] for r in world[job]})
    assert all(len(c) == replicas for c in copies.values())
    for name, c in copies.items():
        assert all(torch.equal(c[0], other) for other in c[1:]), name


def test_the_slow_rank_waits_as_long_as_its_compute_and_the_others_do_not(world: dict) -> None:
    for rank, r in enumerate(world["split"]):
        for compute, wait, sync in r["timings"]:
            assert compute > 0 and sync >= 0
            assert wait == pytest.approx(compute if rank in SLOW else 0.0, rel=1e-6, abs=1e-9)
    assert all(len(r["p2p"]) == 3 and min(r["p2p"]) > 0 for r in world["split"])  # every rank of a pipeline sends or receives


def test_layers_are_reduced_over_the_ranks_that_hold_them(world: dict) -> None:
    roles = rank_roles(world["plan"])
    sets = sync_sets(roles, world["plan"].model.num_layers)
    covered = sorted(layer for _, layers in sets for layer in layers)
    assert covered == list(range(world["plan"].model.num_layers))
    for ranks, layers in sets:
        assert len(ranks) == 2 and all(all(layer in roles[r].layers for layer in layers) for r in ranks)


def test_tensor_parallel_stages_take_consecutive_ranks(world: dict) -> None:
    """Searched tp-2 plans: one replica of two tp-2 stages, and two tp-2 whole-model replicas of uneven shares."""
    pipe, shares = (Plan.model_validate_json(w_plan) for w_plan in (world["tp_pipe_plan"], world["tp_shares_plan"]))
    assert [len(r.stages) for r in pipe.hetero.replicas] == [2] and pipe.mesh.tp == 2
    assert [len(r.stages) for r in shares.hetero.replicas] == [1, 1] and len({r.micro_batches for r in shares.hetero.replicas}) == 2
    roles = rank_roles(pipe)
    assert [(r.stage, r.tp_rank, r.gpu) for r in roles] == [(s, t, d) for s, stage in enumerate(pipe.hetero.replicas[0].stages)
                                                         for t, d in enumerate(stage.devices)]
    assert [r["tp_rank"] for r in world["tp_pipe"]] == [0, 1, 0, 1]


def test_context_parallel_stages_are_refused_in_one_line(world: dict) -> None:
    plan = world["plan"]
    with pytest.raises(InputError, match="cp 1"):
        rank_roles(plan.model_copy(update={"mesh": plan.mesh.model_copy(update={"cp": 2})}))


def test_a_uniform_pipeline_takes_megatrons_rank_order(world: dict) -> None:
    """rank = d + dp x p at tp 1: ranks 0, 1 hold the first stage of replicas 0, 1."""
    assert [(r["replica"], r["layers"][0] == 0) for r in world["uniform"]] == [(0, True), (1, True), (0, False), (1, False)]


def test_meshplan_run_trains_the_plan_with_a_slow_rank_like_one_process(world: dict) -> None:
    folder = world["folder"]
    (folder / "plan.json").write_text(world["plan"].to_json())
    done = subprocess.run([sys.executable, CLI, "run", "plan.json", "--model", world["config"], "--nproc-per-node", "4", "--steps", "3",
                           "--warmup", "1", "--seed", "1234", "--device", "cpu", "--inject-slowdown", "3=0.5", "-o", "run.json"],
                          cwd=folder, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    record = RunRecord.model_validate_json((folder / "run.json").read_text())
    assert record.losses == pytest.approx(world["reference"].losses, rel=RTOL)
    times = record.rank_times
    assert times is not None and [t.layers for t in times] == [list(r.layers) for r in rank_roles(world["plan"])]
    # rank r runs GPU r (the GPU --slow planned for is the rank --inject-slowdown slows), whatever the stage order
    assert [t.gpu for t in times] == sorted(s.devices[0] for r in world["plan"].hetero.replicas for s in r.stages) == [0, 1, 2, 3]
    assert times[3].wait_s == pytest.approx(times[3].compute_s) and not any(any(t.wait_s) for t in times[:3])
    assert all(t.p2p_s is not None and len(t.p2p_s) == 3 for t in times)
