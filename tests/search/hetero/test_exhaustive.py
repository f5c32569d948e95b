"""Proof of the heterogeneous search on small mixed clusters (at most 16 GPUs of two types): its best
step time equals the brute-force optimum of ``search.hetero.exhaustive`` under the same cost model,
and its plan, priced again replica by replica, gives the same step."""

from __future__ import annotations

import pytest

from profiles.degrade import degrade
from search.hetero.search import search_hetero
from search.hetero.types import HeteroRequest
from tests.search.hetero.cases import exhaustive_optimum, mixed, tiny_model

REL = 1e-9
CASES = [
    # (fast GPUs, slow GPUs, slow group's memory, --slow, --down, request)
    (4, 4, 2.0, None, None, {"global_batch": 8, "seq_len": 1024, "max_pp": 2, "micro_batches": (1, 2)}),
    (4, 4, 0.6, None, None, {"global_batch": 8, "seq_len": 1024, "max_pp": 3, "micro_batches": (1,), "tps": (1, 2)}),
    (4, 8, 2.0, "1=0.5", None, {"global_batch": 8, "seq_len": 1024, "max_pp": 2, "micro_batches": (1,), "tps": (2,)}),
    (8, 8, 2.0, None, "node:3", {"global_batch": 8, "seq_len": 2048, "max_pp": 2, "micro_batches": (1, 2), "tps": (2, 4)}),
    (8, 8, 1.0, "node:0=0.7", None, {"global_batch": 6, "seq_len": 2048, "max_pp": 2, "micro_batches": (1,), "tps": (4,)}),
]


@pytest.mark.parametrize("fast, slow, hbm, slow_flag, down_flag, request_args", CASES)
def test_search_equals_exhaustive(fast, slow, hbm, slow_flag, down_flag, request_args):
    model = tiny_model()
    cluster = degrade(mixed(fast, slow, hbm), slow_flag, down_flag)
    req = HeteroRequest(**request_args)
    got = search_hetero(model, cluster, req)
    want = exhaustive_optimum(fast, slow, hbm, slow_flag, down_flag, tuple(sorted(request_args.items())))
    assert got.stats.status == "optimal" and got.stats.gap == 0.0
    if want is None:
        assert got.best is None
        return
    assert got.best is not None and got.best.fits
    assert got.best.step_time_s == pytest.approx(want.step_time_s, rel=REL)
    assert sum(r.micro_batches for r in got.best.replicas) * got.best.config.micro_batch == req.global_batch
