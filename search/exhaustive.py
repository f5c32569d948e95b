"""Exhaustive reference solver: every configuration of the search space, each estimated by the cost
model, for small spaces only.

Written apart from the search (it imports nothing from ``search`` but the shared result types) so
that it can check it, networkx style: one independent checker for every algorithm. The space, spelt
out literally (issue 3; the same space ``search.space`` documents):

- tp: divisors of the GPUs, at most ``max_tp`` (default: GPUs per node), dividing every transformer
  layer's heads and KV heads;
- cp: 1, or divisors c of the GPUs with seq_len % 2c == 0, c <= 32, for models with transformer
  layers (ring attention splits attention; none of the deepspeed target);
- pp: divisors of the GPUs, at most the number of transformer layers (all layers without any);
- dp = GPUs / (tp·cp·pp), integral and dividing the global batch;
- ep: 1 for dense models, else divisors of dp·cp that divide every expert count;
- sp in {False, True} when tp > 1; zero in {0, 1, 2, 3};
- micro-batch: divisors of global_batch/dp up to 16 (or those in ``request.micro_batches``);
- schedule: pp = 1: 1f1b; pp > 1: 1f1b, gpipe, zb-h1, and interleaved-1f1b with vpp in
  2..max_vpp when the transformer layers divide into pp·vpp and the micro-batches into pp;
- stage split: every contiguous split of the whole layer list into pp·vpp non-empty chunks;
- recomputation: every per-layer assignment of none / selective / full to transformer and generic
  layers (the others none);
- attention: flash (eager on V100); every other ``ParallelConfig`` field at its default;
- engine: the target's (``native`` for native); deepspeed overlaps the gradient reduction only with
  ZeRO 1-3 (``overlap_comm``) and the parameter gather only with ZeRO-3 (stages 1-2 gather inside
  the optimizer step); TP communication overlap is tried (off and on) with SP except for deepspeed
  (no setting) and torchtitan unless ``request.compile`` is True (async TP needs torch.compile);
  ``compile`` is ``request.compile`` (None: the engine's default).
- native (what ``planner.runtime`` runs, ``planner.plans.native_rules``): zb-h1 with a whole number of rounds (micro-batches a
  multiple of max(1, micro-batches // pp)) and one recompute mode for every layer, none or full.
``request.nonuniform=False`` keeps only the default split (``costmodel.table.default_stage_layers``)
and one recompute mode for every layer. Targets narrow the space as ``ecosystem-notes`` B1-B3, B6 say:
megatron (one mode for all layers, or full recomputation of the first N layers of every chunk;
1f1b and interleaved only; the final norm and the output head in one chunk), deepspeed (ZeRO <= 1
with pp > 1, no ZeRO-3 for MoE models, DeepSpeed's own split ``deepspeed_stage_layers``, recompute
none or full for every layer, no cp, 1f1b), torchtitan (ZeRO 0 or 3, ep dividing the sharded dp
(dp under ZeRO-3, else 1) x cp, uniform recompute, no zb-h1). Optimal = least step time among
configurations whose estimate fits in memory.

``request.constraints`` keeps only the configurations whose tp, pp, cp, dp, ep, vpp, zero and
micro-batch lie in their ranges and whose sp and schedule equal the fixed ones; a fixed recompute
mode leaves only the assignment that gives every recomputable layer that mode. An explicit upper bound
(or a lower bound above the cap) replaces the default cap of tp (GPUs per node), cp (32), vpp
(``max_vpp``) and the micro-batch (16).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator

from costmodel.specs import ClusterSpec, GenericLayer, HeadLayer, ModelSpec, NormLayer, ParallelConfig, TransformerLayer
from costmodel.step import estimate_step
from costmodel.table import build_cost_table, deepspeed_stage_layers, default_stage_layers
from search.types import Candidate, SearchRequest, SearchResult, SearchStats

MAX_CONFIGS = 2_000_000
"""Largest space the solver enumerates (about ten minutes at ~4,000 estimates/s on one core of the
development machine); larger spaces raise ``ValueError``."""
MAX_CP = 32
MAX_MICRO_BATCH = 16
MODES = ("none", "selective", "full")
ZERO = {"native": (0, 1, 2, 3), "megatron": (0, 1, 2, 3), "torchtitan": (0, 3), "deepspeed": (0, 1, 2, 3)}
ZERO_WITH_PP = {**ZERO, "deepspeed": (0, 1), "megatron": (0, 1)}
SP_WITH_TP = {"native": (False, True), "megatron": (False, True), "torchtitan": (True,), "deepspeed": (False,)}
SCHEDULES = {
    "native": ("1f1b", "gpipe", "zb-h1", "interleaved-1f1b"),
    "megatron": ("1f1b", "interleaved-1f1b"),
    "torchtitan": ("1f1b", "gpipe", "interleaved-1f1b"),
    "deepspeed": ("1f1b",),
}


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _blocks(model: ModelSpec) -> list[TransformerLayer]:
    return [x for x in model.layers if isinstance(x, TransformerLayer)]


def _units(model: ModelSpec) -> int:
    """Layers a pipeline cuts between: transformer layers, or every layer of a model without any."""
    return len(_blocks(model)) or len(model.layers)


def base_configs(model: ModelSpec, cluster: ClusterSpec, req: SearchRequest) -> Iterator[dict]:
    """Every (mesh, sp, zero, micro-batch, schedule) of the space as ``ParallelConfig`` fields."""
    blocks, c = _blocks(model), req.constraints
    max_tp = req.max_tp or _cap(c.tp, cluster.gpus_per_node)
    experts = sorted({b.num_experts for b in blocks if b.num_experts > 0})
    attention = "eager" if "v100" in cluster.gpu.name else "flash"
    gpus = req.gpus
    for tp, cp, pp in itertools.product(_divisors(gpus), _divisors(gpus), _divisors(gpus)):
        if tp > max_tp or any(b.num_heads % tp or b.num_kv_heads % tp for b in blocks):
            continue
        if cp > 1 and (req.target == "deepspeed" or not blocks or cp > _cap(c.cp, MAX_CP) or req.seq_len % (2 * cp)):
            continue
        if pp > _units(model) or gpus % (tp * cp * pp):
            continue
        dp = gpus // (tp * cp * pp)
        if req.global_batch % dp:
            continue
        eps = [e for e in _divisors(dp * cp) if all(n % e == 0 for n in experts)] if experts else [1]
        zeros = ZERO_WITH_PP[req.target] if pp > 1 else ZERO[req.target]
        allowed = req.micro_batches or range(1, int(min(req.global_batch, _cap(c.micro_batch, MAX_MICRO_BATCH))) + 1)
        mbs = [b for b in _divisors(req.global_batch // dp) if b in allowed]
        sps = (False,) if tp == 1 else SP_WITH_TP[req.target]
        for ep, sp, zero, mb in itertools.product(eps, sps, zeros, mbs):
            if req.target == "deepspeed" and experts and zero == 3:
                continue  # DeepSpeed's engine refuses native MoE layers under ZeRO-3
            if req.target == "torchtitan" and ((dp if zero == 3 else 1) * cp) % ep:
                continue  # torchtitan carves EP out of dp_shard x cp
            m = req.global_batch // (mb * dp)
            async_tp = req.target == "torchtitan" and req.compile is True  # async TP needs torch.compile
            overlaps = (False, True) if sp and (req.target in ("native", "megatron") or async_tp) else (False,)
            for (schedule, vpp), overlap in itertools.product(_schedules(model, req, pp, m, tp), overlaps):
                if req.target == "native" and schedule == "zb-h1" and zero == 3:
                    continue  # native-zb-h1-zero3: the zero-bubble weight pass finds no gradient under FSDP2's ZeRO 3
                if not _satisfies(c, tp=tp, pp=pp, cp=cp, dp=dp, ep=ep, vpp=vpp, zero=zero, micro_batch=mb, sp=sp, schedule=schedule):
                    continue
                yield dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, sp=sp, zero=zero, micro_batch=mb,
                           global_batch=req.global_batch, seq_len=req.seq_len, schedule=schedule, attention=attention,
                           tp_comm_overlap=overlap, engine=req.target, compile=req.compile, **_overlaps(req.target, zero))


def _overlaps(target: str, zero: int) -> dict[str, bool]:
    """Data-parallel overlap of ``target`` at ``zero`` (deepspeed: see the module docstring)."""
    if target != "deepspeed":
        return {}
    return {"overlap_grad_reduce": zero >= 1, "overlap_param_gather": zero == 3}


def _schedules(model: ModelSpec, req: SearchRequest, pp: int, m: int, tp: int) -> list[tuple[str, int]]:
    if pp == 1:
        return [("1f1b", 1)]
    allowed = SCHEDULES[req.target]
    zb_runs = req.target != "native" or (m % max(1, m // pp) == 0 and req.constraints.recompute != "selective")
    out = [(s, 1) for s in ("1f1b", "gpipe", "zb-h1") if s in allowed and (s != "zb-h1" or zb_runs)]
    if "interleaved-1f1b" in allowed and m % pp == 0:
        top = int(min(_units(model), _cap(req.constraints.vpp, req.max_vpp)))
        out += [("interleaved-1f1b", v) for v in range(2, top + 1) if _units(model) % (pp * v) == 0]
    return out


def _cap(bounds: tuple[int, int | None] | None, default: int) -> float:
    """Largest value to enumerate: an explicit upper bound, else ``default`` (no cap when the lower
    bound is above it)."""
    if bounds is None:
        return default
    if bounds[1] is not None:
        return bounds[1]
    return default if bounds[0] <= default else math.inf


def _satisfies(constraints, **values) -> bool:
    """Every value lies in its constraint's range, or equals its fixed value."""
    for name, value in values.items():
        want = getattr(constraints, name)
        if want is None:
            continue
        if isinstance(want, tuple):
            if value < want[0] or (want[1] is not None and value > want[1]):
                return False
        elif value != want:
            return False
    return True


def splits(model: ModelSpec, req: SearchRequest, chunks: int) -> list[tuple[int, ...]]:
    """Stage splits: every composition of the layer count into ``chunks`` positive parts (for
    megatron none that parts the final norm from the head), or the default split alone
    (``nonuniform=False``), or DeepSpeed's own split (the deepspeed target)."""
    n = len(model.layers)
    if req.target == "deepspeed":
        return [deepspeed_stage_layers(model, chunks)]
    if not req.nonuniform:
        return [default_stage_layers(model, chunks)]
    loss_stage = req.target == "megatron" and n >= 2 and isinstance(model.layers[-2], NormLayer) and isinstance(model.layers[-1], HeadLayer)
    cuts = (c for c in itertools.combinations(range(1, n), chunks - 1) if not (loss_stage and n - 1 in c))
    return [tuple(b - a for a, b in zip((0,) + c, c + (n,))) for c in cuts]


def _recomputable(model: ModelSpec) -> list[int]:
    return [i for i, x in enumerate(model.layers) if isinstance(x, (TransformerLayer, GenericLayer))]


def recompute_assignments(model: ModelSpec, req: SearchRequest, sizes: tuple[int, ...], schedule: str = "1f1b") -> list[tuple[str, ...]]:
    """Per-layer recomputation of every layer, as the target allows (and, for native, the
    schedule: zb-h1 takes one mode, none or full), without duplicates."""
    movable = _recomputable(model)
    n = len(model.layers)

    def assign(modes) -> tuple[str, ...]:
        out = ["none"] * n
        for i, mode in zip(movable, modes):
            out[i] = mode
        return tuple(out)

    if req.constraints.recompute:
        return [assign([req.constraints.recompute] * len(movable))]
    native_zb = req.target == "native" and schedule == "zb-h1" and len(sizes) > 1
    uniform = [assign([mode] * len(movable)) for mode in MODES if not ((req.target == "deepspeed" or native_zb) and mode == "selective")]
    if native_zb:
        return uniform
    if not req.nonuniform or req.target in ("deepspeed", "torchtitan"):
        return uniform
    if req.target == "native":
        return [assign(modes) for modes in itertools.product(MODES, repeat=len(movable))]
    return list(dict.fromkeys(uniform + _block_assignments(model, sizes)))


def _block_assignments(model: ModelSpec, sizes: tuple[int, ...]) -> list[tuple[str, ...]]:
    """Megatron ``--recompute-method block --recompute-num-layers N``: the first N recomputable
    layers of every chunk recompute fully, the rest not at all (ecosystem-notes B1)."""
    movable = set(_recomputable(model))
    starts = [0, *itertools.accumulate(sizes)]
    per_chunk = [[i for i in range(a, b) if i in movable] for a, b in zip(starts, starts[1:])]
    out = []
    for count in range(1, max(map(len, per_chunk), default=0) + 1):
        layers = ["none"] * len(model.layers)
        for chunk in per_chunk:
            for i in chunk[:count]:
                layers[i] = "full"
        out.append(tuple(layers))
    return out


def _assignment_count(model: ModelSpec, req: SearchRequest, schedule: str = "1f1b", chunks: int = 1) -> int:
    """Recompute assignments per split, or an upper bound of it (megatron's block variants)."""
    movable = len(_recomputable(model))
    if req.constraints.recompute:
        return 1
    if req.target == "native" and schedule == "zb-h1" and chunks > 1:
        return 2  # none or full for every layer
    if not req.nonuniform or req.target in ("deepspeed", "torchtitan"):
        return 3
    if req.target == "native":
        return 3**movable
    return 3 + movable


def space_size(model: ModelSpec, cluster: ClusterSpec, req: SearchRequest, stop_at: int | None = None) -> int:
    """Configurations of the space (megatron's block variants counted by an upper bound); counting
    stops once it passes ``stop_at``."""
    n, total = len(model.layers), 0
    for base in base_configs(model, cluster, req):
        chunks = base["pp"] * base["vpp"]
        per_split = _assignment_count(model, req, base["schedule"], chunks)
        count = 1 if not req.nonuniform or req.target == "deepspeed" else math.comb(n - 1, chunks - 1)
        total += count * per_split
        if stop_at is not None and total > stop_at:
            break
    return total


def configurations(model: ModelSpec, cluster: ClusterSpec, req: SearchRequest) -> Iterator[ParallelConfig]:
    """Every configuration of the space, in a fixed order."""
    for base in base_configs(model, cluster, req):
        for sizes in splits(model, req, base["pp"] * base["vpp"]):
            for layers in recompute_assignments(model, req, sizes, base["schedule"]):
                yield ParallelConfig(**base, stage_layers=sizes, layer_recompute=layers)


def exhaustive_search(model: ModelSpec, cluster: ClusterSpec, req: SearchRequest, limit: int = MAX_CONFIGS) -> SearchResult:
    """The fastest configuration that fits, by estimating every configuration of the space.

    Raises ``ValueError`` when the space holds more than ``limit`` configurations.
    """
    start = time.perf_counter()
    size = space_size(model, cluster, req, stop_at=limit)
    if size > limit:
        raise ValueError(f"the space holds more than {limit:,} configurations; the exhaustive solver is for small spaces")
    table = build_cost_table(model, cluster)
    best: dict[tuple, Candidate] = {}
    miss: Candidate | None = None
    evaluated = 0
    for cfg in configurations(model, cluster, req):
        cand = Candidate(cfg, estimate_step(table, cfg))
        evaluated += 1
        if not cand.fits:
            if miss is None or cand.estimate.over_by_gib < miss.estimate.over_by_gib:
                miss = cand
            continue
        key = _shape(cfg)
        if key not in best or cand.step_time_s < best[key].step_time_s:
            best[key] = cand
    ranked = sorted(best.values(), key=lambda c: c.step_time_s)
    stats = SearchStats(evaluated, 0, "exhaustive", "optimal", 0.0, time.perf_counter() - start)
    if not ranked:
        return SearchResult(None, (), stats, miss)
    return SearchResult(ranked[0], tuple(ranked[1 : req.top_k + 1]), stats)


def _shape(cfg: ParallelConfig) -> tuple:
    """Configurations that differ only in split and recomputation share a shape (one per ranking)."""
    return (cfg.tp, cfg.cp, cfg.pp, cfg.dp, cfg.ep, cfg.vpp, cfg.schedule, cfg.sp, cfg.zero, cfg.micro_batch)
