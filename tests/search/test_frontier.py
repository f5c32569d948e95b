"""The lazy frontier gives the options in exactly the order that bounding every option and sorting
gives, and the quick bound never exceeds the full one."""

from __future__ import annotations

from costmodel.headroom import usable_gib
from costmodel.step import straggler_time
from costmodel.table import build_cost_table
from search.bounds import bound_s, compute_floor_s, memory_bound_gib, quick_bound_s
from search.core import _all_options
from search.frontier import Frontier
from search.types import SearchRequest
from tests.search.test_search_parts import tiny_cluster, tiny_model


def test_frontier_order_is_the_sorted_full_bounds() -> None:
    model, cluster = tiny_model(layers=4), tiny_cluster(2.0)
    req = SearchRequest(gpus=4, global_batch=8, seq_len=2048)
    table = build_cost_table(model, cluster)
    every = _all_options(model, cluster, req)
    straggler = straggler_time(4, cluster.gpus_per_node)
    full = [bound_s(table, o, {}) for o in every]
    assert all(quick_bound_s(table, o, straggler, {}) <= b for o, b in zip(every, full))
    fits = [i for i, o in enumerate(every) if memory_bound_gib(table, o) <= usable_gib(cluster)]
    assert 0 < len(fits) < len(every)  # some options are over memory, and the frontier drops them
    frontier, order = Frontier(table, every, {}, compute_floor_s(model, cluster, req), None), []
    while (front := frontier.peek()) is not None:
        order.append(front[:2])
        frontier.take()
    assert order == sorted((full[i], i) for i in fits)
    assert frontier.lowest_s() is None and len(frontier.memory) == len(every)
