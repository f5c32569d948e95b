"""Parts of the heterogeneous search: TP units and pools, the min-max allocation against brute force,
kind curves against direct prices, stage splits that give faster GPUs more layers, and a plan that
``Pricing.estimate`` reproduces from its replica specs."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from costmodel.specs import ParallelConfig
from profiles.degrade import degrade
from search.hetero.search import search_hetero
from search.hetero.alloc import allocate
from search.hetero.curve import KindCurve
from search.hetero.price import Pricing, _share
from search.hetero.types import HeteroRequest
from search.hetero.units import kinds, pools
from tests.search.hetero.cases import mixed, tiny_model


def test_units_stay_in_one_node_and_take_the_slowest_speed():
    cluster = degrade(mixed(8, 8), "1=0.5", "node:3")
    got = pools(cluster, 2)
    assert [(p.group, p.speed, len(p.units)) for p in got] == [(0, 1.0, 3), (0, 0.5, 1), (1, 1.0, 2)]
    assert got[1].units == ((0, 1),) and all(u[0] // 4 == u[-1] // 4 for p in got for u in p.units)
    assert pools(cluster, 8) == []  # four-GPU nodes: no TP 8
    assert kinds(2, 2) == [(0, 0), (1, 1), (0, 1), (1, 0)]


def _brute(times, counts, total):
    best = math.inf
    replicas = sum(counts)
    for cut in itertools.combinations(range(1, total), replicas - 1):
        parts = [b - a for a, b in zip((0,) + cut, cut + (total,))]
        owners = [k for k, n in enumerate(counts) for _ in range(n)]
        best = min(best, max(times[k](m) for k, m in zip(owners, parts)))
    return best


@pytest.mark.parametrize("seed", range(20))
def test_allocation_is_the_min_max_optimum(seed):
    rng = random.Random(seed)
    kinds_n = rng.randint(1, 3)
    counts = [rng.randint(1, 2) for _ in range(kinds_n)]
    total = rng.randint(sum(counts), 9)
    tables = []
    for _ in range(kinds_n):
        steps = sorted(rng.uniform(0, 5) for _ in range(total + 1))
        cap = rng.randint(2, total + 1)  # memory runs out past cap micro-batches
        tables.append([s if m < cap else math.inf for m, s in enumerate(steps)])
    times = [lambda m, t=t: t[m] for t in tables]
    got = allocate(times, counts, total)
    want = _brute(times, counts, total)
    if math.isinf(want):
        assert got is None
    else:
        assert got[0] == pytest.approx(want) and sum(map(sum, got[1])) == total and min(map(min, got[1])) >= 1


def test_kind_curve_lines_match_direct_prices():
    model, cluster = tiny_model(), mixed(4, 4)
    pricing = Pricing(model, cluster)
    keys, used = [(0, 1.0), (1, 1.0)], frozenset({(0, 1.0), (1, 1.0)})
    base = ParallelConfig(tp=1, pp=2, dp=1, micro_batch=1, global_batch=40, seq_len=1024)
    curve = KindCurve(pricing, (0, 1), keys, used, base, 2, ("none", "selective", "full"))
    for m in (1, 3, 7, 12):
        t, cfg = curve.best(m)
        direct = min(est.step_time_s for sizes in pricing.splits((0, 1), keys, used, _share(base, 2, m)) for mode in ("none", "selective", "full")
                     if (est := pricing.replica(keys, used, _share(base, 2, m).model_copy(update={"stage_layers": sizes, "recompute": mode}))).fits)
        assert t == pytest.approx(direct, rel=1e-9)
        assert pricing.replica(keys, used, cfg).step_time_s == pytest.approx(t, rel=1e-9)


def test_faster_stage_gets_more_layers():
    model = tiny_model(blocks=48, hidden=512)
    pricing = Pricing(model, mixed(4, 4, 4.0))
    keys = [(0, 1.0), (1, 1.0)]
    cfg = ParallelConfig(pp=3, dp=1, global_batch=8, seq_len=1024, engine="megatron")  # fused kernels: compute-bound blocks
    sizes = [s for s in pricing.splits((0, 1, 1), keys, frozenset(keys), cfg) if s is not None]
    assert sizes and sizes[0][0] > 2 * sizes[0][1] and sizes[0][0] > 2 * sizes[0][2]  # three times the peak


def test_plan_reprices_to_its_step_and_shares_follow_speed():
    model, cluster = tiny_model(), degrade(mixed(4, 4), "node:1=0.5")
    req = HeteroRequest(global_batch=16, seq_len=1024, pps=(1,), tps=(1,), micro_batches=(1,))
    best = search_hetero(model, cluster, req).best
    again = Pricing(model, cluster).estimate(best.config, [r.spec for r in best.replicas])
    assert again.step_time_s == best.step_time_s
    fast = [r.micro_batches for r in best.replicas if r.stages[0].cluster == "fast"]
    slow = [r.micro_batches for r in best.replicas if r.stages[0].cluster == "slow"]
    assert fast and (not slow or min(fast) > max(slow))
    assert sum(r.share for r in best.replicas) == pytest.approx(1.0)
    assert sum(r.grad_weight for r in best.replicas) == pytest.approx(len(best.replicas))  # w_r = D m_r / M


def test_bounds_stay_below_prices():
    model, cluster = tiny_model(), mixed(4, 4)
    pricing = Pricing(model, cluster)
    keys = [(0, 1.0), (1, 1.0)]
    used = frozenset(keys)
    rng = random.Random(1)
    for tp, pp, mode in itertools.product((1, 2), (1, 2, 3), ("none", "selective", "full")):
        for _ in range(3):
            stage_pools = [rng.choice(keys) for _ in range(pp)]
            cuts = sorted(rng.sample(range(1, len(model.layers)), pp - 1))
            sizes = tuple(b - a for a, b in zip([0] + cuts, cuts + [len(model.layers)])) if pp > 1 else None
            base = ParallelConfig(tp=tp, pp=pp, dp=3, global_batch=3, seq_len=1024, sp=tp > 1, zero=1)
            a, b = pricing.pair_line(stage_pools, base, mode, sizes)
            for m in (1, 4, 9):
                cfg = _share(base, 3, m).model_copy(update={"recompute": mode, "stage_layers": sizes})
                assert pricing.replica(stage_pools, used, cfg).step_time_s >= a + b * m


def test_homogeneous_plan_prices_as_estimate_step():
    from costmodel.hetero import ClusterGroup, HeteroCluster
    from costmodel.step import estimate_step
    from costmodel.table import build_cost_table
    from search.hetero.types import ReplicaSpec
    from tests.search.hetero.cases import node

    model, spec = tiny_model(), node("fast", 300, 4.0, 25)
    cluster = HeteroCluster(name="one", groups=(ClusterGroup(cluster=spec, gpus=8),))
    cfg = ParallelConfig(tp=2, pp=2, dp=2, micro_batch=1, global_batch=8, seq_len=1024, sp=True, zero=1, stage_layers=(4, 3))
    specs = [ReplicaSpec(((4 * r, 4 * r + 1), (4 * r + 2, 4 * r + 3)), (4, 3), 4) for r in range(2)]
    got = Pricing(model, cluster).estimate(cfg, specs)
    assert got.step_time_s == estimate_step(build_cost_table(model, spec), cfg).step_time_s
    assert [r.grad_weight for r in got.replicas] == [1.0, 1.0]
