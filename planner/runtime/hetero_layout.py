"""Which rank runs which stage of which replica, for heterogeneous plans that pipeline (issue 22).

A heterogeneous plan (``plan.hetero``) lists every data-parallel replica with its own pipeline
stages: each stage on its own GPU group, with its own layers (faster GPUs take more layers), and its
own share of the micro-batches. The runtime gives rank r the r-th GPU the plan uses, in GPU index
order (so that rank 3 is GPU 3, the GPU ``--slow 3=...`` planned for and ``--inject-slowdown 3=...``
slows), while every stage's tp GPUs are consecutive (TP units are aligned blocks of a node), and
otherwise numbers ranks replica after replica, stage after stage; with whole-model replicas in GPU
order, rank r is replica r, as :mod:`planner.runtime.shares` has it. A uniform plan run with ``--inject-slowdown`` has the same
layout in Megatron-LM's rank order (``rank = t + tp x (d + dp x p)``, :mod:`planner.runtime.mesh`).
Tensor parallelism inside a stage takes ``tp`` consecutive ranks, the stage's devices in order.

Gradient groups: a layer's tensor-parallel shard ``t`` lives on one rank of every replica, and not on
the same rank in replicas with different splits, so each shard's gradient is averaged over the ranks
that hold it. Layers held
by the same set of ranks share one flat all-reduce on one process group
(:func:`sync_sets`): a rank sends exactly the gradients it holds, once per step, and the sets come in
one order on every rank (first layer first), so that ranks in several groups never wait on each other
in a cycle (the earliest set not yet reduced always has every member at it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.errors import InputError
from planner.plans.schema import Plan


@dataclass(frozen=True)
class RankRole:
    """One rank's stage of one replica."""

    rank: int
    replica: int
    stage: int
    """Stage index inside the replica (0: it takes the tokens; last: it computes the loss)."""
    stages: int
    """Pipeline depth of the replica."""
    layers: tuple[int, ...]
    recompute: tuple[str, ...]
    """Recomputation of each of its layers."""
    micro_batches: int
    """The replica's micro-batches per step (its data-parallel share)."""
    gpu: int
    """Cluster-wide GPU index the plan gives this rank."""
    group: int
    """The GPU's group in the plan's cluster."""
    tp_rank: int = 0
    """Index among the stage's tensor-parallel ranks (consecutive global ranks)."""


def rank_roles(plan: Plan) -> list[RankRole]:
    """Every rank's role; one-line :class:`InputError` for what this runtime cannot run (cp or ep > 1, interleaving)."""
    m = plan.mesh
    if m.cp != 1 or m.ep != 1:
        raise InputError(f"heterogeneous pipelines and injected slowdowns run with cp 1 and ep 1; this plan has cp {m.cp}, ep {m.ep}")
    if plan.hetero is not None:
        roles: list[RankRole] = []
        for r in plan.hetero.replicas:
            for k, s in enumerate(r.stages):
                for t, gpu in enumerate(s.devices):
                    roles.append(RankRole(rank=len(roles), replica=r.index, stage=k, stages=len(r.stages), layers=tuple(s.layers),
                                          recompute=(r.recompute,) * len(s.layers), micro_batches=r.micro_batches, gpu=gpu,
                                          group=s.group, tp_rank=t))
        return _by_device(roles, m.tp)
    if plan.schedule.virtual_stages != 1:
        raise InputError(f"injected slowdowns run pipelines without interleaving; this plan has {plan.schedule.virtual_stages} "
                         "virtual stages")
    by_rank = {}
    for p, stage in enumerate(plan.stages):
        for d in range(m.dp):
            for t in range(m.tp):
                rank = t + m.tp * (d + m.dp * p)
                by_rank[rank] = RankRole(rank=rank, replica=d, stage=p, stages=m.pp, layers=tuple(stage.layers),
                                         recompute=tuple(stage.layer_recompute) or ("none",) * len(stage.layers),
                                         micro_batches=plan.schedule.num_microbatches, gpu=rank, group=0, tp_rank=t)
    return [by_rank[r] for r in sorted(by_rank)]


def _by_device(roles: list[RankRole], tp: int) -> list[RankRole]:
    """``roles`` renumbered so that rank r runs the r-th of the plan's GPUs in index order (rank 3 is
    GPU 3 when every GPU is used, as ``--slow 3=...`` and ``--inject-slowdown 3=...`` both mean), as
    long as every stage's tp ranks stay consecutive and in order; otherwise replica-then-stage order."""
    ordered = sorted(roles, key=lambda role: role.gpu)
    if any(role.tp_rank != i % tp or ordered[i - role.tp_rank].gpu != ordered[i].gpu - role.tp_rank
           for i, role in enumerate(ordered)):
        return roles
    return [replace(role, rank=i) for i, role in enumerate(ordered)]


def is_pipelined(plan: Plan) -> bool:
    """Whether some replica of ``plan`` has more than one stage or rank (the pipeline runtime's plans:
    pipelines, tensor parallelism inside a stage)."""
    if plan.hetero is not None:
        return plan.mesh.tp > 1 or any(len(r.stages) > 1 for r in plan.hetero.replicas)
    return plan.mesh.pp > 1 or plan.mesh.tp > 1


def replica_counts(roles: list[RankRole]) -> list[int]:
    """Micro-batches of each replica, replica order."""
    counts: dict[int, int] = {}
    for role in roles:
        counts[role.replica] = role.micro_batches
    return [counts[r] for r in sorted(counts)]


def holders(roles: list[RankRole], layer: int, tp_rank: int = 0) -> tuple[int, ...]:
    """The ranks holding ``layer``'s tensor-parallel shard ``tp_rank`` (one per replica), ascending."""
    return tuple(sorted(role.rank for role in roles if layer in role.layers and role.tp_rank == tp_rank))


def sync_sets(roles: list[RankRole], num_layers: int, tied: tuple[int, int] | None = None) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The gradient groups: ``(ranks, layers)`` for each distinct set of ranks holding the same shard of
    some layers, in the order of their first layer (every rank computes the same list). ``tied``
    (embedding layer, head layer) adds the key ``-1`` for the tied weight, held by the union of both
    layers' holders."""
    found: dict[tuple[int, ...], list[int]] = {}
    replicas = len(replica_counts(roles))
    for layer in range(num_layers):
        for t in range(1 + max(r.tp_rank for r in roles)):
            ranks = holders(roles, layer, t)
            if len(ranks) != len({roles[r].replica for r in ranks}) or len(ranks) != replicas:
                raise InputError(f"layer {layer} is held by ranks {list(ranks)}: every replica must hold every layer once")
            found.setdefault(ranks, []).append(layer)
    if tied is not None:
        for t in range(1 + max(r.tp_rank for r in roles)):
            union = tuple(sorted(set(holders(roles, tied[0], t)) | set(holders(roles, tied[1], t))))
            found.setdefault(union, []).append(-1)
    return [(ranks, tuple(layers)) for ranks, layers in found.items()]
