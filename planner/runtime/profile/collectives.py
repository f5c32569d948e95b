"""Collectives over the process group, timed as nccl-tests times them (NVIDIA/nccl-tests
doc/PERFORMANCE.md): every rank runs the same collective back to back, the slowest rank's time counts,
``algbw = S / t`` and ``busbw = algbw x`` the bus factor that makes the number comparable with the link
speed (all-reduce 2(n-1)/n; all-gather, reduce-scatter and all-to-all (n-1)/n; send/recv 1).

``intra_node`` groups hold the ranks of one node; ``inter_node`` groups one rank of each node (the
ranks with the same local rank), so their traffic crosses the network. Every rank creates every group
(``torch.distributed.new_group`` is collective) and runs its own groups' collectives concurrently with
the other groups', as training does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from planner.runtime.profile.timing import Budget, time_call

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
"""Collectives measured, nccl-tests names."""
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "send_recv": lambda n: 1.0,
}
"""nccl-tests bus-bandwidth factor per collective over n ranks (doc/PERFORMANCE.md)."""


@dataclass(frozen=True)
class Groups:
    """This rank's groups in each scope (None where the scope has fewer than two ranks)."""

    intra_node: tuple[dist.ProcessGroup | None, list[int]]
    inter_node: tuple[dist.ProcessGroup | None, list[int]]

    def scopes(self) -> list[tuple[str, dist.ProcessGroup, list[int]]]:
        """(scope, group, global ranks) for every scope with at least two ranks."""
        out = []
        for scope, (group, ranks) in (("intra_node", self.intra_node), ("inter_node", self.inter_node)):
            if group is not None and len(ranks) > 1:
                out.append((scope, group, ranks))
        return out


def build_groups(world: int, ranks_per_node: int) -> Groups:
    """One group per node and one per local rank across nodes (ranks are node-major, as torchrun numbers them)."""
    rank = dist.get_rank()
    nodes = max(1, world // ranks_per_node)
    mine_intra: tuple[dist.ProcessGroup | None, list[int]] = (None, [rank])
    mine_inter: tuple[dist.ProcessGroup | None, list[int]] = (None, [rank])
    for node in range(nodes):
        ranks = list(range(node * ranks_per_node, (node + 1) * ranks_per_node))
        group = dist.new_group(ranks) if len(ranks) > 1 else None
        if rank in ranks:
            mine_intra = (group, ranks)
    for local in range(ranks_per_node):
        ranks = list(range(local, world, ranks_per_node))
        group = dist.new_group(ranks) if len(ranks) > 1 else None
        if rank in ranks:
            mine_inter = (group, ranks)
    return Groups(mine_intra, mine_inter)


def element_count(op: str, nbytes: int, n: int) -> int:
    """fp32 elements of the buffer S, rounded so that it splits evenly over ``n`` ranks."""
    return max(n, nbytes // 4 // n * n)


def collective_call(op: str, count: int, group: dist.ProcessGroup, ranks: list[int], device: torch.device) -> Callable[[], None]:
    """A closure running ``op`` on a ``count``-element fp32 buffer over ``group``."""
    n = len(ranks)
    me = ranks.index(dist.get_rank())
    full = torch.ones(count, device=device)
    part = torch.ones(count // n, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(full, group=group)
    if op == "all_gather":
        return lambda: dist.all_gather_into_tensor(full, part, group=group)
    if op == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(part, full, group=group)
    if op == "all_to_all":
        out = torch.empty_like(full)
        return lambda: dist.all_to_all_single(out, full, group=group)
    return _send_recv(full, ranks, me)


def _send_recv(buffer: torch.Tensor, ranks: list[int], me: int) -> Callable[[], None]:
    """Pairs (0,1), (2,3), ... of the group exchange ``buffer`` once each way per call (a ping-pong);
    one call is two one-way transfers, so its time is halved by the caller. An odd last rank idles."""
    pair = me ^ 1
    if pair >= len(ranks):
        return lambda: None
    peer = ranks[pair]

    def exchange() -> None:
        if me % 2 == 0:
            dist.send(buffer, peer)
            dist.recv(buffer, peer)
        else:
            dist.recv(buffer, peer)
            dist.send(buffer, peer)

    return exchange


def time_collective(op: str, nbytes: int, group: dist.ProcessGroup, ranks: list[int], device: torch.device, budget: Budget) -> tuple[int, float]:
    """(bytes actually moved S, this rank's median seconds per collective); the caller takes the
    slowest rank. Every rank of the world calls this in the same order."""
    count = element_count(op, nbytes, len(ranks))
    call = collective_call(op, count, group, ranks, device)
    dist.barrier()
    seconds = time_call(call, device, budget)
    return count * 4, seconds / 2 if op == "send_recv" else seconds


def slowest(seconds: float, device: torch.device) -> float:
    """The largest of every rank's ``seconds`` (an all-reduce MAX over the world)."""
    value = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())


def median_over_ranks(values: list[float]) -> list[float]:
    """Per position, the median of every rank's ``values`` (all ranks pass lists of equal length)."""
    gathered: list[list[float] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, values)
    columns = zip(*[g for g in gathered if g is not None])
    return [float(torch.tensor(col, dtype=torch.float64).median().item()) for col in columns]
