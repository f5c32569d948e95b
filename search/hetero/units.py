"""The building blocks of a heterogeneous plan: TP units, pools of equal units, replica kinds, mixes.

- A *unit* is ``tp`` consecutive GPUs of one node of one group (TP never leaves a GPU type or a
  node); it runs at its slowest GPU's speed.
- A *pool* is every up unit of one group at one speed (a slow node's units form their own pool).
- A *kind* is a replica's pipeline, one pool per stage: a single pool (homogeneous) or two pools,
  each in one contiguous run, so that a replica crosses a group boundary at most once (the slow
  link carries one hop of the pipeline, never the TP collectives). Both orders are kinds: the search
  prices which pool goes first (the first stage holds the most in-flight activations under 1F1B).
- A *mix* is how many replicas of each kind the plan runs; units not used stay idle.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from costmodel.hetero import HeteroCluster

Kind = tuple[int, ...]
"""Pool index of each pipeline stage."""
Mix = tuple[tuple[Kind, int], ...]
"""(kind, replicas) pairs with replicas > 0, in kind order."""


@dataclass(frozen=True)
class Pool:
    """Every up TP unit of one group at one speed."""

    group: int
    speed: float
    units: tuple[tuple[int, ...], ...]
    """Cluster-wide GPU indices of each unit, in cluster order."""


def pools(cluster: HeteroCluster, tp: int) -> list[Pool]:
    """The pools of ``tp``-GPU units: group by group, fastest speed first; groups whose node ``tp``
    does not divide give none."""
    out = []
    for g, group in enumerate(cluster.groups):
        gpn = group.cluster.gpus_per_node
        if gpn % tp:
            continue
        by_speed: dict[float, list[tuple[int, ...]]] = {}
        first = cluster.first_gpu(g)
        for node in group.alive_nodes():
            for u in range(gpn // tp):
                local = range(node * gpn + u * tp, node * gpn + (u + 1) * tp)
                speed = min(group.speed(i) for i in local)
                by_speed.setdefault(speed, []).append(tuple(first + i for i in local))
        out += [Pool(g, speed, tuple(units)) for speed, units in sorted(by_speed.items(), key=lambda kv: -kv[0])]
    return out


def kinds(num_pools: int, pp: int) -> list[Kind]:
    """Homogeneous kinds, then every two-pool kind (each order, every number of stages per pool)."""
    out: list[Kind] = [(e,) * pp for e in range(num_pools)]
    for a, b in itertools.permutations(range(num_pools), 2):
        out += [(a,) * k + (b,) * (pp - k) for k in range(1, pp)]
    return out


def usage(kind: Kind) -> Counter:
    """Units of each pool one replica of ``kind`` takes."""
    return Counter(kind)


def mix_count(avail: list[int], kind_list: list[Kind], stop_at: int) -> int:
    """Mixes :func:`every_mix` yields, counting up to ``stop_at``."""
    return sum(1 for _ in itertools.islice(every_mix(avail, kind_list), stop_at))


def every_mix(avail: list[int], kind_list: list[Kind]) -> Iterator[Mix]:
    """Every non-empty mix whose units fit the pools' ``avail`` units."""

    def walk(i: int, left: list[int], chosen: list[tuple[Kind, int]]) -> Iterator[Mix]:
        if i == len(kind_list):
            if chosen:
                yield tuple(chosen)
            return
        need = usage(kind_list[i])
        most = min(left[e] // n for e, n in need.items())
        for count in range(most + 1):
            rest = list(left)
            for e, n in need.items():
                rest[e] -= n * count
            yield from walk(i + 1, rest, chosen + ([(kind_list[i], count)] if count else []))

    yield from walk(0, list(avail), [])


def packings(avail: list[int], pp: int) -> list[Mix]:
    """Mixes by rule for large clusters: for every set of pools kept (dropping slow pools is an
    option), (a) each kept pool filled with homogeneous replicas, its leftover units joined into at
    most one two-pool replica; (b) for every ordered pair of kept pools, replicas that take both in
    proportion to their units, the rest filled homogeneously."""
    n = len(avail)
    out: dict[Mix, None] = {}
    for keep in _subsets(n):
        out[_homogeneous(avail, keep, pp)] = None
        for a, b in itertools.permutations(keep, 2):
            share = pp * avail[a] / max(1, avail[a] + avail[b])
            for k in sorted({max(1, min(pp - 1, int(share))), max(1, min(pp - 1, int(share) + 1))}):
                if 0 < k < pp:
                    out[_proportional(avail, keep, pp, a, b, k)] = None
    return [mix for mix in out if mix]


def _subsets(n: int) -> list[tuple[int, ...]]:
    """Pool sets to keep: all of them when few, else those that drop a suffix of the slowest."""
    if n <= 4:
        return [s for r in range(n, 0, -1) for s in itertools.combinations(range(n), r)]
    return [tuple(range(k)) for k in range(n, 0, -1)]


def _homogeneous(avail: list[int], keep: tuple[int, ...], pp: int) -> Mix:
    """Each kept pool filled with its own replicas; leftovers of two pools joined into one replica."""
    mix = [((e,) * pp, avail[e] // pp) for e in keep if avail[e] // pp]
    left = [(e, avail[e] % pp) for e in keep if avail[e] % pp]
    if pp > 1 and len(left) >= 2 and left[0][1] + left[1][1] >= pp:
        (a, ra), (b, _) = left[0], left[1]
        mix.append(((a,) * ra + (b,) * (pp - ra), 1))
    return tuple(mix)


def _proportional(avail: list[int], keep: tuple[int, ...], pp: int, a: int, b: int, k: int) -> Mix:
    """Replicas of ``a`` x k stages then ``b`` x (pp - k), as many as both pools allow, and the
    units left filled homogeneously."""
    count = min(avail[a] // k, avail[b] // (pp - k))
    left = list(avail)
    left[a] -= count * k
    left[b] -= count * (pp - k)
    mix = [((a,) * k + (b,) * (pp - k), count)] if count else []
    mix += [((e,) * pp, left[e] // pp) for e in keep if left[e] // pp]
    return tuple(mix)
