"""The plan validator: every reason a plan cannot run as written, found apart from the search.

:func:`plan_problems` checks a :class:`~planner.plans.schema.Plan` against the rules of issue 3, without
importing ``search`` (networkx style: one independent checker for every algorithm):

- the schema version is the one this meshplan writes;
- every string it carries is one printable line of bounded length (``planner.plans.text_checks``);
- the mesh, the schedule and the request agree with the configuration, and the degrees multiply to
  the GPU count (``dp x tp x pp x cp``, Megatron-LM ``arguments.py``);
- the configuration can run the model (``planner.plans.config_checks.parallel_problems``: heads, CP chunks,
  SP, experts, list lengths);
- every model layer is in exactly one stage and in order: the ``pp x vpp`` stages, in chunk order
  (chunk k runs on pipeline rank k mod pp, Megatron's interleaved layout), cover layers 0..n-1
  contiguously with non-empty chunks, and match the configuration's split;
- ``layer_recompute`` is aligned with ``layers`` and matches the configuration; layers that cannot
  recompute (embedding, norm, head) say ``none``;
- batch: global batch = micro-batch x dp x micro-batches (Megatron ``num_microbatches``);
- interleaving: vpp > 1 exactly with the interleaved schedule, which needs pp > 1, the micro-batches
  a multiple of pp and the transformer layers a multiple of pp x vpp;
- memory: the configuration re-estimated with the cost model fits, and the plan's stored estimate
  (stages included) equals the re-estimate within 1e-9 relative;
- the target's rules (``planner.plans.target_rules``), and the target's exporter accepts the plan;
- the user's constraints echoed in ``request.constraints`` hold (``planner.plans.constraints``).
"""

from __future__ import annotations

import math
from typing import Any

from costmodel.specs import ModelSpec, TransformerLayer
from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.plans.constraints import constraint_problems
from planner.errors import InputError
from planner.estimation.result import result_from_step
from planner.plans.schema import SCHEMA_VERSION, Plan
from planner.plans.text_checks import text_problems
from planner.plans.target_rules import export_problems, layer_modes, recomputable, stage_sizes, target_problems
from planner.plans.config_checks import parallel_problems

__all__ = ["layer_modes", "plan_problems", "stage_sizes", "target_problems"]

REL_TOL = 1e-9
"""Relative tolerance between the stored estimate and the re-estimate (same code, same inputs)."""


def plan_problems(plan: Plan, model: ModelSpec | None = None) -> list[str]:
    """Every problem of ``plan``, each one clause; an empty list when the plan is valid.

    ``model`` is the plan's model; without it the model is the plan's own layer list or its preset
    (``planner.plans.named_model.plan_model``: nothing the plan names is imported or run). A model that cannot be
    had is itself a problem, and the checks that need it are skipped.
    """
    if _precision(plan):  # the cost model cannot price it: nothing else to check
        return _precision(plan)
    problems = [*_version(plan), *text_problems(plan.model_dump()), *_agreement(plan), *_batch(plan), *_stage_order(plan)]
    if model is None:
        try:
            from planner.plans.named_model import plan_model

            model = plan_model(plan)
        except InputError as err:
            return problems + [f"cannot check the plan against its model: {err}"]
    config_checks = parallel_problems(model, plan.config, plan.request.gpus) + _model_info(plan, model)
    problems += config_checks + _interleaving(plan, model)
    if not config_checks:  # lists have the model's lengths: the cost model can run the configuration
        problems += _stage_split(plan, model) + _recompute(plan, model) + _constraints(plan, model)
        rules = target_problems(plan.request.target, plan.config, model)
        problems += rules + _memory(plan, model)
        if not problems:  # the target's own exporter has the last word
            problems += export_problems(plan, model)
    return problems


def _precision(plan: Plan) -> list[str]:
    """fp8 only on a GPU with FP8 tensor cores (``GPUSpec.peak_fp8_tflops``), as ``meshplan plan`` searches."""
    gpu = plan.cluster.gpu
    if plan.config.precision == "fp8" and gpu.peak_fp8_tflops is None:
        return [f"precision fp8: GPU {gpu.name} has no FP8 tensor cores (use --precision bf16)"]
    return []


def _version(plan: Plan) -> list[str]:
    if plan.schema_version != SCHEMA_VERSION:
        return [f"schema_version {plan.schema_version!r} is unknown (this meshplan reads {SCHEMA_VERSION!r})"]
    return []


def _agreement(plan: Plan) -> list[str]:
    """Mesh, schedule and request say what the configuration says; degrees tile the GPUs."""
    c, mesh, sched, req = plan.config, plan.mesh, plan.schedule, plan.request
    out = []
    product = c.dp * c.tp * c.pp * c.cp
    if product != req.gpus:
        out.append(f"dp {c.dp} x tp {c.tp} x pp {c.pp} x cp {c.cp} = {product} != {req.gpus} GPUs")
    pairs: list[tuple[str, Any, Any]] = [
        *((f"mesh.{k}", getattr(mesh, k), getattr(c, k)) for k in ("dp", "tp", "pp", "cp", "ep", "sp", "zero")),
        ("schedule.name", sched.name, c.schedule), ("schedule.virtual_stages", sched.virtual_stages, c.vpp),
        ("schedule.micro_batch", sched.micro_batch, c.micro_batch), ("schedule.global_batch", sched.global_batch, c.global_batch),
        ("request.global_batch", req.global_batch, c.global_batch), ("request.seq_len", req.seq_len, c.seq_len),
        ("mesh.gpus_per_node", mesh.gpus_per_node, plan.cluster.gpus_per_node),
        ("mesh.nodes", mesh.nodes, -(-req.gpus // plan.cluster.gpus_per_node)),
    ]
    out += [f"{name} is {have!r} but the configuration says {want!r}" for name, have, want in pairs if have != want]
    if plan.search.status == "optimal" and plan.search.optimality_gap != 0:
        out.append(f"search status optimal with an optimality gap of {plan.search.optimality_gap}")
    return out


def _batch(plan: Plan) -> list[str]:
    """Global batch = micro-batch x dp x micro-batches."""
    s, dp = plan.schedule, plan.config.dp
    if s.micro_batch * dp * s.num_microbatches != s.global_batch:
        return [f"micro-batch {s.micro_batch} x dp {dp} x {s.num_microbatches} micro-batches = "
                f"{s.micro_batch * dp * s.num_microbatches} != global batch {s.global_batch}"]
    return []


def _stage_order(plan: Plan) -> list[str]:
    """pp x vpp non-empty stages in chunk order cover the layers contiguously, on their ranks."""
    c, n = plan.config, plan.model.num_layers
    out = []
    if len(plan.stages) != c.pp * c.vpp:
        out.append(f"{len(plan.stages)} stages, expected pp {c.pp} x vpp {c.vpp} = {c.pp * c.vpp}")
    per_rank, gpn, nxt = c.tp * c.cp * c.dp, plan.cluster.gpus_per_node, 0
    for k, st in enumerate(plan.stages):
        rank = k % c.pp
        if (st.index, st.pp_rank, st.virtual_chunk) != (k, rank, k // c.pp):
            out.append(f"stage {k} is labelled index {st.index}, pp_rank {st.pp_rank}, virtual_chunk {st.virtual_chunk} "
                       f"(chunk {k} is virtual chunk {k // c.pp} of pipeline rank {rank})")
        if not st.layers or st.layers != list(range(nxt, nxt + len(st.layers))):
            out.append(f"stage {k} holds layers {_span(st.layers)}; it must start at layer {nxt} and be contiguous and non-empty")
        nxt = (st.layers[-1] + 1) if st.layers else nxt
        if len(st.layer_recompute) != len(st.layers):
            out.append(f"stage {k} has {len(st.layer_recompute)} layer_recompute entries for {len(st.layers)} layers")
        ranks = [rank * per_rank, (rank + 1) * per_rank - 1]
        if st.ranks != ranks or st.nodes != [r // gpn for r in ranks]:
            out.append(f"stage {k} runs on ranks {st.ranks} (nodes {st.nodes}); pipeline rank {rank} of "
                       f"tp {c.tp} x cp {c.cp} x dp {c.dp} GPUs is ranks {ranks} (nodes {[r // gpn for r in ranks]})")
    if nxt != n:
        out.append(f"the stages cover layers 0..{nxt - 1}, but the model has {n} layers (0..{n - 1})")
    return out


def _span(layers: list[int]) -> str:
    contiguous = len(layers) > 1 and layers[-1] - layers[0] + 1 == len(layers) and layers == list(range(layers[0], layers[-1] + 1))
    return f"{layers[0]}..{layers[-1]}" if contiguous else str(layers if len(layers) <= 8 else layers[:4] + ["..."] + layers[-2:])


def _model_info(plan: Plan, model: ModelSpec) -> list[str]:
    names = [x.name for x in model.layers]
    if plan.model.num_layers != len(names) or plan.model.layer_names != names:
        return [f"the plan lists {plan.model.num_layers} layers, but model {model.name} has {len(names)} "
                "(or they are named differently): the plan was made for another model"]
    return []


def _units(model: ModelSpec) -> int:
    """Layers a pipeline is split between: transformer layers, or all layers of a model without any."""
    return sum(isinstance(x, TransformerLayer) for x in model.layers) or len(model.layers)


def _interleaving(plan: Plan, model: ModelSpec) -> list[str]:
    """vpp > 1 exactly under interleaved 1F1B, with pp > 1 and both divisibilities."""
    c, out = plan.config, []
    if (c.vpp > 1) != (c.schedule == "interleaved-1f1b"):
        out.append(f"schedule {c.schedule} with vpp {c.vpp} (vpp > 1 goes with interleaved-1f1b and only with it)")
    if c.vpp > 1:
        m, units = c.num_microbatches, _units(model)
        if c.pp == 1:
            out.append(f"vpp {c.vpp} needs pp > 1")
        elif m % c.pp:
            out.append(f"{m} micro-batches are not a multiple of pp {c.pp} under the interleaved schedule")
        if units % (c.pp * c.vpp) and c.stage_layers is None:  # an explicit layout (Llama 3's) need not divide evenly
            out.append(f"{units} transformer layers do not divide into pp {c.pp} x vpp {c.vpp} = {c.pp * c.vpp} chunks")
    return out


def _stage_split(plan: Plan, model: ModelSpec) -> list[str]:
    have = [len(st.layers) for st in plan.stages]
    want = list(stage_sizes(plan.config, model))
    return [] if have == want else [f"stages hold {have} layers, but the configuration splits them {want}"]


def _recompute(plan: Plan, model: ModelSpec) -> list[str]:
    """Stage recomputation matches the configuration; non-recomputable layers say none."""
    modes, out = layer_modes(plan.config, model), []
    for st in plan.stages:
        want = [modes[i] for i in st.layers if i < len(modes)]
        if st.layer_recompute != want:
            out.append(f"stage {st.index} recomputes {st.layer_recompute}, but the configuration says {want}")
    fixed = [i for i, x in enumerate(model.layers) if not recomputable(x) and modes[i] != "none"]
    if fixed:
        out.append(f"layers {fixed} ({', '.join(model.layers[i].kind for i in fixed)}) cannot recompute but are marked {modes[fixed[0]]}")
    return out


def _constraints(plan: Plan, model: ModelSpec) -> list[str]:
    """The configuration keeps the constraints the request echoes (``planner.plans.constraints``)."""
    modes = [m for m, x in zip(layer_modes(plan.config, model), model.layers) if recomputable(x)]
    return constraint_problems(plan.request.constraints, plan.config, modes)


def _memory(plan: Plan, model: ModelSpec) -> list[str]:
    """Re-estimate the configuration: it fits, and the stored estimate equals the re-estimate."""
    table = build_cost_table(model, plan.cluster)
    fresh = result_from_step(table, plan.config, estimate_step(table, plan.config), list(plan.estimate.assumptions))
    out = []
    if not fresh.fits:
        out.append(f"needs {fresh.peak_memory_gib:.2f} GiB per GPU, over the {fresh.memory_capacity_gib:.2f} GiB capacity "
                   f"by {fresh.over_by_gib:.2f} GiB")
    stored = plan.estimate.model_dump()
    out += [f"stored estimate {path} = {a!r} differs from the re-estimate {b!r}" for path, a, b in _diff(stored, fresh.model_dump(), "")]
    ranks = {r.rank: r for r in fresh.pipeline_ranks}
    for st in plan.stages:
        r = ranks.get(st.pp_rank)
        if r is None or not _close(st.time_per_microbatch_s, r.time_per_microbatch_s) or not _close(st.memory_gib, r.memory_gib):
            out.append(f"stage {st.index} time/memory differ from pipeline rank {st.pp_rank}'s re-estimate")
    out += [f"alternative {a.rank} ({a.step_time_s:.6g} s) fits and is faster than the plan ({fresh.step_time_s:.6g} s)"
            for a in plan.alternatives if a.fits and a.step_time_s < fresh.step_time_s * (1 - REL_TOL)]
    return out


def _close(a: float, b: float) -> bool:
    """Equal within ``REL_TOL`` relative (and 1e-12 absolute, for terms that are zero)."""
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12)


def _diff(a: Any, b: Any, path: str) -> list[tuple[str, Any, Any]]:
    """Leaves where two dumped estimates differ (numbers within ``REL_TOL``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [(path or "keys", sorted(a), sorted(b))]
        return [d for k in a for d in _diff(a[k], b[k], f"{path}.{k}" if path else k)]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [(path, a, b)]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and not isinstance(a, bool):
        return [] if _close(a, b) else [(path, a, b)]
    return [] if a == b else [(path, a, b)]
