"""Uneven data-parallel shares on CPU gloo (issue 22): the weighted update equals the one-process
run's, and an injected slowdown waits (1/speed - 1) x the compute."""

from __future__ import annotations

import socket

import pytest
import shares_worker as w
import torch
import torch.multiprocessing as mp

from costmodel.hetero import gradient_weights
from planner.errors import InputError
from planner.runtime.shares_run import parse_injection


@pytest.fixture(scope="module")
def world_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("shares") / "out.pt"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(w.worker, args=(4, port, str(out)), nprocs=4, join=True, start_method="spawn")
    return torch.load(out)


def test_uneven_shares_train_exactly_like_one_process(world_run: dict) -> None:
    losses, params = w.reference()
    assert world_run["losses"] == pytest.approx(losses, rel=1e-5)
    for name, ref in params.items():
        torch.testing.assert_close(world_run["params"][name], ref, rtol=1e-4, atol=1e-5)


def test_the_slow_rank_waits_as_long_as_its_compute_and_the_others_do_not(world_run: dict) -> None:
    for rank, steps in enumerate(world_run["timings"]):
        for compute, wait in steps:
            assert wait == pytest.approx(compute if rank == 3 else 0.0, rel=1e-6, abs=1e-9)


def test_weights_make_the_mean_of_weighted_gradients_the_batch_mean() -> None:
    weights = gradient_weights(w.COUNTS)
    assert weights == pytest.approx((1.5, 1.5, 0.5, 0.5)) and sum(weights) == pytest.approx(len(w.COUNTS))


@pytest.mark.parametrize("text", ["3=0", "3=1.5", "x=0.5", "3"])
def test_bad_injections_are_refused(text: str) -> None:
    with pytest.raises(InputError):
        parse_injection(text)


def test_an_injection_parses_ranks_and_speeds() -> None:
    assert parse_injection("3=0.5,1=0.8") == {3: 0.5, 1: 0.8}


def test_rank_r_runs_the_replica_on_gpu_r() -> None:
    """``--slow 1=0.5`` on four GPUs: the search lists the slow GPU's replica last, yet rank 1 (the rank
    ``--inject-slowdown 1=0.5`` slows) runs GPU 1's replica and its smaller share."""
    from pathlib import Path

    import planner
    from planner.runtime.shares import replica_of
    from planner.runtime.shares_run import rank_gpu

    data = Path(__file__).parent / "data"
    plan = planner.plan(model=str(data / "tiny-llama.json"), cluster=str(data / "laptop-cpu-4.json"), slow="1=0.5", gpus=4,
                        global_batch=32, seq_len=64, tp=1, micro_batch=1)
    replicas = plan.hetero.replicas
    assert replicas[-1].stages[0].devices == [1]  # the premise: listed out of GPU order
    assert [rank_gpu(plan, r)[0] for r in range(4)] == [0, 1, 2, 3]
    shares = [replicas[replica_of(plan, r)].micro_batches for r in range(4)]
    assert shares[1] < min(shares[0], shares[2], shares[3])
