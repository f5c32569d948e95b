"""The plan validator: every reason a plan cannot run as written, found apart from the search.

:func:`plan_problems` checks a :class:`~planner.schema.Plan` against the rules of issue 3, without
importing ``search`` (networkx style: one independent checker for every algorithm):

- the schema version is the one this meshplan writes;
- the mesh, the schedule and the request agree with the configuration, and the degrees multiply to
  the GPU count (``dp x tp x pp x cp``, Megatron-LM ``arguments.py``);
- the configuration can run the model (``planner.validation.parallel_problems``: heads, CP chunks,
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
- the target's rules (``ecosystem-notes`` B1-B3, B6; see :func:`target_problems`);
- the user's constraints echoed in ``request.constraints`` hold (``planner.constraints``).
"""

from __future__ import annotations

import math
from typing import Any

from costmodel.specs import GenericLayer, ModelSpec, ParallelConfig, TransformerLayer
from costmodel.step import estimate_step
from costmodel.table import build_cost_table, default_stage_layers
from planner.constraints import constraint_problems
from planner.errors import InputError
from planner.estimator import result_from_step
from planner.schema import SCHEMA_VERSION, Plan
from planner.validation import parallel_problems

REL_TOL = 1e-9
"""Relative tolerance between the stored estimate and the re-estimate (same code, same inputs)."""


def plan_problems(plan: Plan, model: ModelSpec | None = None) -> list[str]:
    """Every problem of ``plan``, each one clause; an empty list when the plan is valid.

    ``model`` is the plan's model; without it the model is the plan's own layer list or its preset
    (``planner.plans.plan_model``: nothing the plan names is imported or run). A model that cannot be
    had is itself a problem, and the checks that need it are skipped.
    """
    problems = [*_version(plan), *_agreement(plan), *_batch(plan), *_stage_order(plan)]
    if model is None:
        try:
            from planner.plans import plan_model

            model = plan_model(plan)
        except InputError as err:
            return problems + [f"cannot check the plan against its model: {err}"]
    config_checks = parallel_problems(model, plan.config, plan.request.gpus) + _model_info(plan, model)
    problems += config_checks + _interleaving(plan, model)
    if not config_checks:  # lists have the model's lengths: the cost model can run the configuration
        problems += _stage_split(plan, model) + _recompute(plan, model) + _constraints(plan, model)
        problems += target_problems(plan.request.target, plan.config, model) + _memory(plan, model)
    return problems


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


def stage_sizes(cfg: ParallelConfig, model: ModelSpec) -> tuple[int, ...]:
    """Layers per chunk of ``cfg`` (its explicit split, or the default one)."""
    return cfg.stage_layers or default_stage_layers(model, cfg.pp * cfg.vpp)


def layer_modes(cfg: ParallelConfig, model: ModelSpec) -> tuple[str, ...]:
    """Recomputation of every layer as the cost model applies it."""
    if cfg.layer_recompute is not None:
        return cfg.layer_recompute
    return tuple(cfg.recompute if _recomputable(x) else "none" for x in model.layers)


def _recomputable(layer: Any) -> bool:
    return isinstance(layer, (TransformerLayer, GenericLayer))


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
    fixed = [i for i, x in enumerate(model.layers) if not _recomputable(x) and modes[i] != "none"]
    if fixed:
        out.append(f"layers {fixed} ({', '.join(model.layers[i].kind for i in fixed)}) cannot recompute but are marked {modes[fixed[0]]}")
    return out


def _constraints(plan: Plan, model: ModelSpec) -> list[str]:
    """The configuration keeps the constraints the request echoes (``planner.constraints``)."""
    modes = [m for m, x in zip(layer_modes(plan.config, model), model.layers) if _recomputable(x)]
    return constraint_problems(plan.request.constraints, plan.config, modes)


def target_problems(target: str, cfg: ParallelConfig, model: ModelSpec) -> list[str]:
    """What ``target`` cannot express (ecosystem-notes B1-B3, B6). megatron: one recompute mode for
    every layer, or full recomputation of the first N layers of every chunk; 1f1b or interleaved.
    deepspeed: ZeRO <= 1 with pp > 1, the default split, one recompute mode (none or full), no cp, 1f1b.
    torchtitan: ZeRO 0 or 3 (FSDP2), one recompute mode, no zb-h1. native: anything. Every plan is
    estimated on its target's engine (``config.engine``, ``costmodel.engines``)."""
    out = []
    if cfg.engine != target:
        out.append(f"config.engine {cfg.engine} is not the plan's target {target}: the estimate must model the engine the plan runs on; re-plan it")
    uniform = len({m for m, x in zip(layer_modes(cfg, model), model.layers) if _recomputable(x)}) <= 1
    if target == "megatron":
        if cfg.pp > 1 and cfg.zero > 1:
            out.append(f"megatron runs ZeRO-{cfg.zero} (Megatron FSDP) only without pipelining (pp {cfg.pp}; use zero 0 or 1)")
        if cfg.schedule not in ("1f1b", "interleaved-1f1b"):
            out.append(f"megatron runs 1f1b or interleaved-1f1b, not {cfg.schedule}")
        if not uniform and not _block_recompute(cfg, model):
            out.append("megatron recomputes one mode for every layer, or fully the first N layers of every chunk (--recompute-method block)")
    elif target == "deepspeed":
        if cfg.pp > 1 and cfg.zero > 1:
            out.append(f"deepspeed forbids ZeRO-{cfg.zero} with pipeline parallelism (pp {cfg.pp}; use zero 0 or 1)")
        if cfg.stage_layers is not None and tuple(cfg.stage_layers) != default_stage_layers(model, cfg.pp * cfg.vpp):
            out.append(f"deepspeed takes no explicit stage split ({list(cfg.stage_layers)} is not the default)")
        if cfg.cp > 1:
            out.append(f"deepspeed has no context parallelism (cp {cfg.cp})")
        if cfg.sp:
            out.append("deepspeed has no Megatron-style sequence parallelism setting (sp)")
        if cfg.schedule != "1f1b":
            out.append(f"deepspeed runs 1f1b, not {cfg.schedule}")
        if "selective" in layer_modes(cfg, model):
            out.append("deepspeed checkpoints whole layers (activation_checkpoint_interval): no selective recomputation")
    elif target == "torchtitan":
        if cfg.zero not in (0, 3):
            out.append(f"torchtitan shards with FSDP2 (zero 3) or not at all (zero 0), not zero {cfg.zero}")
        if cfg.schedule == "zb-h1":
            out.append("torchtitan has no zb-h1 schedule")
        if cfg.tp > 1 and not cfg.sp:
            out.append("torchtitan applies sequence parallelism with every tp > 1 (sp must be on)")
    if cfg.tp_comm_overlap and not (cfg.sp and cfg.tp > 1):
        out.append("tp communication overlap needs sequence parallelism with tp > 1 (Megatron --tp-comm-overlap requires --sequence-parallel)")
    if target == "deepspeed" and cfg.tp_comm_overlap:
        out.append("deepspeed has no tp communication overlap setting")
    if target in ("deepspeed", "torchtitan") and not uniform:
        out.append(f"{target} takes one activation-checkpointing mode for every layer, not a per-layer mix")
    return out


def _block_recompute(cfg: ParallelConfig, model: ModelSpec) -> bool:
    """Full recomputation of the first N recomputable layers of every chunk, none elsewhere."""
    modes, sizes = layer_modes(cfg, model), stage_sizes(cfg, model)
    starts = [0]
    for s in sizes:
        starts.append(starts[-1] + s)
    chunks = [[modes[i] for i in range(a, b) if _recomputable(model.layers[i])] for a, b in zip(starts, starts[1:])]
    counts = [len(ch) - ch[::-1].index("full") if "full" in ch else 0 for ch in chunks]
    if any(ch != ["full"] * k + ["none"] * (len(ch) - k) for ch, k in zip(chunks, counts)):
        return False
    top = max(counts, default=0)
    return all(k == min(top, len(ch)) for ch, k in zip(chunks, counts))


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
