"""``planner.estimate`` on a mixed or degraded cluster: the given uniform configuration, straggler-bound.

``meshplan estimate --cluster dgx-h100:16,dgx-a100:32 --gpus 48 --tp T --pp P ...`` (or any cluster
with ``--slow`` / ``--down``) prices the configuration as an engine that knows no GPU types or
speeds runs it (Megatron-LM, torchtitan and DeepSpeed all do): the GPUs that are up, in cluster
order, replica after replica, stage after stage (stage s of replica r takes the next ``tp`` GPUs);
every replica runs the same micro-batches (``global batch / (micro-batch x dp)``). Each stage is
priced on its own GPU group's hardware at its slowest GPU's speed by the heterogeneous pricing
(``search.hetero.price.Pricing.estimate``, what a heterogeneous plan's ``estimate --plan`` uses), so
the step is the slowest replica's: the straggler-bound uniform plan. ``meshplan plan`` on the same
cluster finds uneven shares and per-group stage splits instead.

DP is derived from the GPUs that are up: (gpus − GPUs on down nodes) / (tp x pp). What the
heterogeneous pricing does not model is refused in one line: context parallelism, interleaving,
expert parallelism, schedules other than 1F1B, and the engine knobs.
"""

from __future__ import annotations

from typing import Any

from costmodel.hetero import HeteroCluster
from costmodel.specs import ModelSpec, ParallelConfig
from planner.errors import InputError
from planner.estimation.result import EstimateResult

UNIFORM_NOTE = ("uniform configuration on a heterogeneous cluster: replicas laid out in GPU order over the GPUs that are up, "
                "equal shares, each stage priced on its own GPU group at its slowest GPU's speed; the step waits for the "
                "slowest replica (meshplan plan finds uneven shares)")
_UNSUPPORTED = {"cp": 1, "vpp": 1, "ep": 1}


def alive_gpus(cluster: HeteroCluster) -> list[int]:
    """Cluster-wide indices of the GPUs on nodes that are up, in order."""
    out = []
    for g, group in enumerate(cluster.groups):
        gpn, first = group.cluster.gpus_per_node, cluster.first_gpu(g)
        out += [first + n * gpn + i for n in group.alive_nodes() for i in range(gpn)]
    return out


def estimate_on_groups(model_spec: ModelSpec, cluster: HeteroCluster, *, global_batch: int, seq_len: int, tp: int, pp: int,
                       micro_batch: int, sp: bool | None, recompute: str, zero: int | None,
                       stage_layers: tuple[int, ...] | None, others: dict[str, Any]) -> EstimateResult:
    """The module's estimate; ``others`` holds the settings the heterogeneous pricing does not take
    (each must be unset or its default)."""
    from planner.estimation.config_checks import parallel_problems
    from planner.estimation.hetero_result import hetero_estimate_result, price_replicas
    from search.hetero.baselines import uniform_layout

    _refuse(others)
    gpus = alive_gpus(cluster)
    problems = [f"tp {tp} does not divide the {g.cluster.gpus_per_node} GPUs per node of {g.cluster.name} (TP stays inside one node)"
                for g in cluster.groups if g.cluster.gpus_per_node % tp]
    if len(gpus) % (tp * pp):
        problems.append(f"tp {tp} x pp {pp} = {tp * pp} does not divide the {len(gpus)} GPUs that are up on {cluster.name}")
    if problems:
        raise InputError(*problems)
    sp = tp > 1 and model_spec.has_sequence if sp is None else sp
    cfg = ParallelConfig(tp=tp, pp=pp, dp=len(gpus) // (tp * pp), micro_batch=micro_batch, global_batch=global_batch, seq_len=seq_len,
                         sp=sp, zero=1 if zero is None else zero, recompute=recompute, stage_layers=stage_layers)
    problems = parallel_problems(model_spec, cfg, len(gpus))
    if problems:
        raise InputError(*problems)
    cand = price_replicas(model_spec, cluster, cfg, uniform_layout(cfg, gpus))
    notes = [UNIFORM_NOTE, f"dp = {len(gpus)} GPUs up / (tp {tp} x pp {pp}) = {cfg.dp}; {cfg.num_microbatches} micro-batches per replica"]
    return hetero_estimate_result(model_spec, cluster, cand, notes)


def _refuse(others: dict[str, Any]) -> None:
    """One line naming the first setting the heterogeneous pricing cannot honour."""
    for name, value in others.items():
        if value is None or value == _UNSUPPORTED.get(name) or (name, value) in (("schedule", "1f1b"), ("target", "native"), ("precision", "bf16")):
            continue
        raise InputError(f"--{name.replace('_', '-')} {value} is not estimated on a heterogeneous cluster "
                         "(it prices tp, pp, micro-batch, sp, recompute, zero and --stage-layers; drop the flag)")
