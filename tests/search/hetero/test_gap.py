"""The lower bound over the whole heterogeneous space (``search.hetero.gap``): below the brute-force
optimum on small mixed clusters, below every plan the search finds, and the gap the search records
on a packed (large) cluster is that bound's, at least 0."""

from __future__ import annotations

import pytest

from profiles.degrade import degrade
from search.hetero.search import bases, search_hetero
from search.hetero.gap import relative_gap, space_bound
from search.hetero.price import Pricing
from search.hetero.types import HeteroRequest
from tests.search.hetero.cases import exhaustive_optimum, mixed, tiny_model
from tests.search.hetero.test_exhaustive import CASES


def _bound(model, cluster, req: HeteroRequest) -> float:
    return space_bound(Pricing(model, cluster), ((base, pool_list) for base, pool_list, _, _ in bases(model, cluster, req)))


@pytest.mark.parametrize("fast, slow, hbm, slow_flag, down_flag, request_args", CASES)
def test_the_bound_is_below_the_exhaustive_optimum(fast, slow, hbm, slow_flag, down_flag, request_args) -> None:
    model, req = tiny_model(), HeteroRequest(**request_args)
    cluster = degrade(mixed(fast, slow, hbm), slow_flag, down_flag)
    want = exhaustive_optimum(fast, slow, hbm, slow_flag, down_flag, tuple(sorted(request_args.items())))
    assert want is not None
    bound = _bound(model, cluster, req)
    assert 0 < bound <= want.step_time_s
    assert bound >= 0.3 * want.step_time_s  # a bound worth recording: within a small factor of the optimum


@pytest.fixture(scope="module")
def packed():
    """96 single-GPU units of two types: more than the search enumerates, so it packs by rule."""
    model, cluster = tiny_model(), mixed(48, 48, 2.0)
    req = HeteroRequest(global_batch=192, seq_len=1024, tps=(1,), max_pp=2, micro_batches=(1,), top_k=3)
    return model, cluster, req, search_hetero(model, cluster, req)


def test_a_packed_search_records_the_bound_s_gap(packed) -> None:
    model, cluster, req, result = packed
    assert result.stats.status == "feasible" and result.best is not None
    bound = _bound(model, cluster, req)
    assert bound <= result.best.step_time_s
    assert all(bound <= alt.step_time_s for alt in result.alternatives)
    assert result.stats.gap == relative_gap(result.best.step_time_s, bound)
    assert result.stats.gap > 0.0  # a relaxation that ignores the gradient sync is not tight here: the gap says so


def test_relative_gap_is_never_negative() -> None:
    assert relative_gap(1.0, 1.0) == 0.0
    assert relative_gap(0.999999, 1.0) == 0.0
    assert relative_gap(1.5, 1.0) == pytest.approx(0.5)


def test_an_option_whose_weights_overflow_every_gpu_is_left_out() -> None:
    from costmodel.specs import ParallelConfig
    from planner.intake.models.presets import build_preset
    from profiles import load_hetero_cluster
    from search.hetero.gap import weights_overflow

    model, cluster = build_preset("llama3.1-70b"), load_hetero_cluster("dgx-h100:8,dgx-a100:8")
    hbm = [g.cluster.gpu.hbm_gib for g in cluster.groups]
    base = ParallelConfig(tp=1, pp=1, dp=1, micro_batch=1, global_batch=8, seq_len=1024, zero=1)
    assert weights_overflow(model, base, hbm)
    assert not weights_overflow(model, base.model_copy(update={"tp": 8}), hbm)
    assert not weights_overflow(model, base.model_copy(update={"zero": 3}), hbm)  # ZeRO-3 shards the weights
    pricing = Pricing(model, cluster)
    full = base.model_copy(update={"recompute": "full"})
    assert not pricing.replica([(0, 1.0)], frozenset({(0, 1.0)}), full).fits  # the cost model agrees: it cannot fit
