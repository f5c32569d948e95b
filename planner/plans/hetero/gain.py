"""The gain of a heterogeneous plan over its homogeneous alternatives, as the plan records it.

The alternatives are planned at plan time by ``search.hetero.baselines`` (the fastest group alone,
every GPU as the slowest type, and on a degraded cluster the straggler-blind uniform plan and the
healthy nodes alone); each becomes a :class:`HeteroBaselineInfo` with its step and the plan's speedup
(its step / the plan's). They are facts beside the plan: ``estimate --plan`` re-prices the replicas
only, and the validator checks each speedup against the two steps.
"""

from __future__ import annotations

from costmodel.hetero import HeteroCluster
from costmodel.specs import ModelSpec
from planner.plans.hetero.schema import HeteroBaselineInfo
from search.hetero.baselines import BASELINE_TIME_LIMIT_S, homogeneous_baselines
from search.types import Constraints

SPEEDUP_DIGITS = 6
"""Digits the recorded speedup keeps (the validator recomputes it to this rounding)."""


def baseline_infos(model: ModelSpec, cluster: HeteroCluster, global_batch: int, seq_len: int, step_time_s: float,
                   time_limit_s: float | None = None, fixed: dict[str, tuple[int, int]] | None = None) -> list[HeteroBaselineInfo]:
    """Every baseline that applies to ``cluster`` with the plan's speedup over it, searched under the
    plan's ``fixed`` dimensions (tp, pp, micro_batch, zero). ``time_limit_s`` (the plan's
    ``--time-limit``) caps each baseline search at a quarter of it; else ``BASELINE_TIME_LIMIT_S`` each."""
    from planner.plans.build import summary

    limit = BASELINE_TIME_LIMIT_S if time_limit_s is None else min(BASELINE_TIME_LIMIT_S, time_limit_s / 4)
    out = []
    for b in homogeneous_baselines(model, cluster, global_batch, seq_len, limit, Constraints(**(fixed or {}))):
        out.append(HeteroBaselineInfo(name=b.name, label=b.label, gpus=b.gpus, step_time_s=b.step_time_s,  # type: ignore[arg-type]
                                      speedup=speedup(b.step_time_s, step_time_s), search_status=b.status,
                                      plan_summary=summary(b.config) if b.config is not None else None))
    return out


def speedup(baseline_s: float | None, plan_s: float) -> float | None:
    """The baseline's step over the plan's, rounded to ``SPEEDUP_DIGITS`` (None when no baseline plan fits)."""
    return None if baseline_s is None else round(baseline_s / plan_s, SPEEDUP_DIGITS)


def gain_lines(baselines: list[HeteroBaselineInfo] | None) -> list[str]:
    """One line per baseline for the terminal summary."""
    out = []
    for b in baselines or []:
        if b.step_time_s is None or b.speedup is None:
            out.append(f"  vs {b.label}: no plan fits")
        else:
            out.append(f"  vs {b.label}: {b.step_time_s:.4g} s per step, this plan {b.speedup:.2f}x as fast")
    return (["gain over homogeneous alternatives:"] + out) if out else []
