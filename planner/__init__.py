"""meshplan's Python API for launchers: ``planner.estimate(...)``, ``planner.plan(...)``.

Both take keyword arguments named like the CLI flags and return pydantic models whose
``model_dump()`` is the ``--json`` output. Bad input raises :class:`InputError`; a search in which no
configuration fits raises :class:`NoFeasiblePlanError`. Heavy modules load on first use, so that
``import planner`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.errors import InputError, NoFeasiblePlanError

if TYPE_CHECKING:
    from planner.estimation.result import EstimateResult
    from planner.plans.schema import Plan

__all__ = ["estimate", "plan", "estimate_plan", "load_plan", "config_plan", "save_plan", "InputError", "NoFeasiblePlanError"]


def estimate(**kwargs: Any) -> EstimateResult:
    """Predict one parallel configuration; see :func:`planner.estimation.estimate.estimate`."""
    from planner.estimation.estimate import estimate as _estimate

    return _estimate(**kwargs)


def plan(**kwargs: Any) -> Plan:
    """Search the fastest plan that fits; see :func:`planner.plans.route.plan` (``cluster`` may name GPU
    groups, ``slow`` / ``down`` degrade it) and :func:`planner.plans.build.plan`."""
    from planner.plans.route import plan as _plan

    return _plan(**kwargs)


def estimate_plan(path: str, retrace: bool = False) -> EstimateResult:
    """Re-estimate the configuration a plan file records, once it validates; see
    :func:`planner.plans.load.estimate_plan`."""
    from planner.plans.load import estimate_plan as _estimate_plan

    return _estimate_plan(path, retrace)


def load_plan(path: str, retrace: bool = False) -> Plan:
    """Read a plan file and validate it as ``meshplan validate`` does (nothing it names is run
    unless ``retrace``); see :func:`planner.plans.load.load_plan`."""
    from planner.plans.load import load_plan as _load_plan

    return _load_plan(path, retrace)


def config_plan(**kwargs: Any) -> Plan:
    """The plan of exactly the configuration ``estimate(**kwargs)`` estimates (``meshplan estimate -o``);
    see :func:`planner.plans.given.config_plan`."""
    from planner.plans.given import config_plan as _config_plan

    return _config_plan(**kwargs)


def save_plan(plan: Plan, path: str) -> None:
    """Write a plan file atomically; see :func:`planner.plans.given.save_plan`."""
    from planner.plans.given import save_plan as _save_plan

    _save_plan(plan, path)


def export(plan: Plan, to: str, model: Any = None) -> Any:
    """A plan's export for one engine (``megatron``: ``.argv()`` / ``.groups``, ``torchtitan``: ``.toml()`` /
    ``.python()``, ``deepspeed``: ``.config`` / ``.code``), as ``meshplan export`` writes it; raises
    ``UnsupportedPlanError`` (an ``InputError``) naming a field the engine cannot express. See
    :func:`planner.outputs.export.export`."""
    from planner.outputs.export import export as _export

    return _export(plan, to, model)


def report(plan: Plan, format: str = "md") -> str:
    """The plan report as Markdown (``md``) or one self-contained HTML page (``html``); see
    :func:`planner.outputs.report.render_report`."""
    from planner.outputs.report import render_report

    return render_report(plan, format)


__all__ += ["export", "report"]


def sweep(**kwargs: Any) -> Any:
    """The best plan, time and cost to train for every point of a grid of clusters, GPU counts,
    batches and sequence lengths; see :func:`planner.capacity.api.sweep`."""
    from planner.capacity.api import sweep as _sweep

    return _sweep(**kwargs)


__all__ += ["sweep"]


def apply(plan: Plan, module: Any, **kwargs: Any) -> Any:
    """Run ``plan``'s split of ``module`` on the initialised process group (DeviceMesh, DTensor TP/SP,
    FSDP2, checkpointing, torch.distributed.pipelining); returns a runtime with ``step(tokens) -> loss``.
    See :func:`planner.runtime.apply.apply`; a plan with uneven data-parallel shares (``plan.hetero``) runs
    on :func:`planner.runtime.shares.apply_shares` (``module`` materialised on CPU, one whole-model replica
    per rank, or one stage of a pipelined replica per rank)."""
    if getattr(plan, "hetero", None) is not None:
        from planner.runtime.shares import apply_shares

        return apply_shares(plan, module, **kwargs)
    from planner.runtime.apply import apply as _apply

    return _apply(plan, module, **kwargs)


__all__ += ["apply"]


def serve_estimate(**kwargs: Any) -> Any:
    """Predict one serving deployment (aggregated replicas or disaggregated prefill / decode
    workers); see :func:`planner.serving.estimate.serve_estimate`."""
    from planner.serving.estimate import serve_estimate as _serve_estimate

    return _serve_estimate(**kwargs)


def serve_plan(**kwargs: Any) -> Any:
    """Search the serving deployment with the most output tokens/s per GPU meeting the latency
    targets; see :func:`planner.serving.plan.serve_plan`."""
    from planner.serving.plan import serve_plan as _serve_plan

    return _serve_plan(**kwargs)


__all__ += ["serve_estimate", "serve_plan"]
