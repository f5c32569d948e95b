"""Rank coordinates and group placement against hand-worked layouts."""

from __future__ import annotations

from planner.outputs.report.layout import coordinates, node_ranks, placements, pp_ranks_of_node, strides
from planner.plans.schema import Mesh


def mesh(**kw) -> Mesh:
    base = dict(dp=4, tp=2, pp=4, cp=2, ep=1, sp=True, zero=1, gpus_per_node=8, nodes=8)
    return Mesh(**{**base, **kw})


def test_megatron_order_puts_tp_fastest() -> None:
    m = mesh()
    assert strides(m) == {"tp": 1, "cp": 2, "dp": 4, "pp": 16}
    assert coordinates(0, m) == {"tp": 0, "cp": 0, "dp": 0, "pp": 0}
    assert coordinates(37, m) == {"tp": 1, "cp": 0, "dp": 1, "pp": 2}  # 37 = 1 + 2*(0 + 2*(1 + 4*2))


def test_every_rank_has_distinct_coordinates() -> None:
    m = mesh()
    seen = {tuple(coordinates(r, m).values()) for r in range(64)}
    assert len(seen) == 64


def test_which_groups_cross_the_network() -> None:
    by_dim = {p.dim: p for p in placements(mesh())}
    assert not by_dim["tp"].crosses_network and not by_dim["cp"].crosses_network
    assert by_dim["dp"].nodes_spanned == 2 and by_dim["dp"].first_group == (0, 4, 8, 12)
    assert by_dim["pp"].nodes_spanned == 4 and by_dim["pp"].groups == 16
    assert by_dim["ep"].size == 1


def test_expert_groups_are_tp_apart() -> None:
    by_dim = {p.dim: p for p in placements(mesh(tp=1, cp=1, dp=64, pp=1, ep=8))}
    assert by_dim["ep"].stride == 1 and by_dim["ep"].first_group == tuple(range(8)) and not by_dim["ep"].crosses_network


def test_custom_rank_order() -> None:
    m = mesh(rank_order="tp-dp-cp-pp")
    assert strides(m) == {"tp": 1, "dp": 2, "cp": 8, "pp": 16}


def test_nodes() -> None:
    m = mesh()
    assert node_ranks(m, 2) == list(range(16, 24))
    assert pp_ranks_of_node(m, 2) == [1]
