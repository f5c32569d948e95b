"""Pricing a heterogeneous plan and stating it as the contract's estimate (``estimate --plan``).

It sits in ``planner.estimation`` (below ``planner.plans``): both the plan builder and the estimate of a
uniform configuration on a mixed cluster (``planner.estimation.hetero``) price through it; the plan's
``hetero`` section is read into specs by ``planner.plans.hetero.specs``.

:func:`price_replicas` re-prices a plan's replicas with ``search.hetero.price.Pricing`` (the same
arithmetic as the search, so the plan's step time is reproduced to the last bit) and
:func:`hetero_estimate_result` turns the priced candidate into the :class:`EstimateResult` every
command reads: the step is the slowest replica's, tokens/s the whole batch's, MFU against the
nominal peak of every GPU used, memory the fullest stage's against its own GPU type; the time and
memory breakdowns are those of the slowest replica's bottleneck stage's GPU type (stated in the
assumptions).
"""

from __future__ import annotations

from costmodel.hetero import HeteroCluster
from costmodel.specs import ModelSpec, ParallelConfig
from planner.estimation.result import EstimateResult, RankEstimate, result_from_step
from search.hetero.price import Pricing
from search.hetero.types import HeteroCandidate, HeteroReplica, ReplicaSpec

BREAKDOWN_NOTE = ("heterogeneous plan: step = slowest replica; time and memory breakdowns are those of the slowest "
                  "replica's bottleneck stage's GPU type; MFU against the nominal peak of every GPU used")


def price_replicas(model: ModelSpec, cluster: HeteroCluster, base: ParallelConfig, specs: list[ReplicaSpec]) -> HeteroCandidate:
    """The plan priced replica by replica (``search.hetero.price.Pricing.estimate``)."""
    return Pricing(model, cluster).estimate(base, specs)


def hetero_estimate_result(model: ModelSpec, cluster: HeteroCluster, cand: HeteroCandidate,
                           assumptions: list[str]) -> EstimateResult:
    """The contract's estimate of a priced heterogeneous candidate (see the module docstring)."""
    pricing = Pricing(model, cluster)
    slowest = max(cand.replicas, key=lambda r: r.step_time_s)
    keys = [pricing.pool_of(s.devices) for s in slowest.stages]
    used = frozenset(pricing.pool_of(s.devices) for r in cand.replicas for s in r.stages)
    cfg = _replica_config(cand.config, len(cand.replicas), slowest)
    rep = pricing.replica(keys, used, cfg)
    bottleneck = max(range(len(rep.stage_time_s)), key=lambda s: rep.stage_time_s[s])
    table = pricing.table(keys[bottleneck], used)
    step = rep.estimates[rep.stage_table[bottleneck]]
    notes = assumptions if BREAKDOWN_NOTE in assumptions else [*assumptions, BREAKDOWN_NOTE]
    base = result_from_step(table, cfg, step, notes)
    job = cand.config
    flops = step.model_flops / cfg.global_batch * job.global_batch
    peak = sum(cluster.groups[s.group].cluster.gpu.peak_bf16_tflops * 1e12 * len(s.devices)
               for r in cand.replicas for s in r.stages)
    stages = [s for r in cand.replicas for s in r.stages]
    fullest = max(stages, key=lambda s: (s.memory_gib / s.capacity_gib, s.memory_gib))
    ranks = [RankEstimate(rank=i, chunks=[list(s.layers)], time_per_microbatch_s=s.time_s, memory_gib=s.memory_gib)
             for i, s in enumerate(slowest.stages)]
    return base.model_copy(update={
        "step_time_s": cand.step_time_s,
        "tokens_per_s": job.global_batch * job.seq_len / cand.step_time_s,
        "mfu": flops / cand.step_time_s / peak,
        "model_tflops_per_gpu": flops / (cand.gpus_used * cand.step_time_s) / 1e12,
        "peak_memory_gib": fullest.memory_gib,
        "memory_capacity_gib": fullest.capacity_gib,
        "fits": cand.fits,
        "over_by_gib": max(0.0, *(s.memory_gib - s.capacity_gib for s in stages)),
        "pipeline_ranks": ranks,
        "config": job.model_dump(mode="json"),
    })


def _replica_config(job: ParallelConfig, replicas: int, replica: HeteroReplica) -> ParallelConfig:
    """One replica's configuration as ``Pricing.estimate`` prices it (its share, split, recompute)."""
    sizes = tuple(len(s.layers) for s in replica.stages)
    return job.model_copy(update={"dp": replicas, "global_batch": replica.micro_batches * job.micro_batch * replicas,
                                  "stage_layers": sizes if len(sizes) > 1 else None, "recompute": replica.recompute})
