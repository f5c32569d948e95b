"""The search space: mesh shapes and, for each, the per-job options, with divisibility pruning.

Space (shared with ``search.exhaustive``): tp divides the GPUs, is at most the node size (TP inside a
node before anything crosses the network) and divides every block's heads and KV heads; cp is 1 or
splits the sequence into 2·cp chunks; pp is at most the number of blocks; dp = GPUs/(tp·cp·pp) divides
the global batch; ep divides the experts and dp·cp; sp only with tp > 1; zero 0-3; micro-batch divides
the per-replica batch; interleaving (vpp > 1) needs pp > 1, blocks divisible by pp·vpp and
micro-batches divisible by pp. Every option runs on the target's engine with its overlap settings
(``search.targets.engine_fields``). Targets narrow it to what their exporters take (``search.targets``:
ZeRO stages, MoE with ZeRO, the expert degree, DeepSpeed's own split), and so do the user's
constraints (``SearchRequest.constraints``: fixed or bounded degrees, ZeRO stage, micro-batch, SP,
schedule; an explicit upper bound replaces the default cap of tp, cp, vpp and the micro-batch).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from costmodel.specs import ClusterSpec, ModelSpec, ParallelConfig, TransformerLayer
from costmodel.table import deepspeed_stage_layers, default_stage_layers
from search.targets import engine_fields, native_schedule_allowed, native_zero_allowed, rules_for, tp_overlap_allowed, zero_allowed
from search.types import SearchRequest

MAX_CP = 32
MAX_MICRO_BATCH = 16


@dataclass(frozen=True, order=True)
class Mesh:
    """Job-level degrees."""

    tp: int
    cp: int
    pp: int
    dp: int
    ep: int


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in increasing order (trial division up to sqrt(n))."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def blocks(model: ModelSpec) -> list[TransformerLayer]:
    """The model's transformer blocks."""
    return [x for x in model.layers if isinstance(x, TransformerLayer)]


def pipeline_units(model: ModelSpec) -> int:
    """Layers a pipeline may cut between: the blocks, or all layers of a model without blocks."""
    return len(blocks(model)) or len(model.layers)


def meshes(model: ModelSpec, cluster: ClusterSpec, req: SearchRequest) -> list[Mesh]:
    """Every mesh shape of the space that the request's constraints allow, in a fixed order."""
    bl, c = blocks(model), req.constraints
    max_tp = req.max_tp or c.cap("tp", cluster.gpus_per_node)
    tps = [t for t in divisors(req.gpus) if t <= max_tp and all(b.num_heads % t == 0 and b.num_kv_heads % t == 0 for b in bl)]
    rules = rules_for(req.target)
    max_cp = c.cap("cp", MAX_CP)
    cps = [x for x in divisors(req.gpus) if x == 1 or (rules.context_parallel and x <= max_cp and req.seq_len % (2 * x) == 0 and bl and model.has_sequence)]
    experts = sorted({b.num_experts for b in bl if b.is_moe})
    out = []
    for tp, cp, pp in itertools.product(tps, cps, divisors(req.gpus)):
        if pp > pipeline_units(model) or req.gpus % (tp * cp * pp):
            continue
        dp = req.gpus // (tp * cp * pp)
        if req.global_batch % dp or not all(c.allows(k, v) for k, v in (("tp", tp), ("cp", cp), ("pp", pp), ("dp", dp))):
            continue
        eps = _expert_degrees(experts, dp * cp) if rules.expert_parallel else [1]
        out += [Mesh(tp, cp, pp, dp, ep) for ep in eps if c.allows("ep", ep)]
    return out


def _expert_degrees(experts: list[int], dp_cp: int) -> list[int]:
    if not experts:
        return [1]
    return [e for e in divisors(dp_cp) if all(n % e == 0 for n in experts)]


def micro_batches(mesh: Mesh, req: SearchRequest) -> list[int]:
    """Micro-batch sizes dividing the per-replica batch."""
    per_replica, c = req.global_batch // mesh.dp, req.constraints
    allowed = sorted(set(req.micro_batches)) if req.micro_batches else range(1, int(min(per_replica, c.cap("micro_batch", MAX_MICRO_BATCH))) + 1)
    return [b for b in allowed if per_replica % b == 0 and (c.micro_batch is None or c.allows("micro_batch", b))]


def schedules(model: ModelSpec, mesh: Mesh, num_microbatches: int, req: SearchRequest) -> list[tuple[str, int]]:
    """(schedule, vpp) pairs the target and the constraints allow for this mesh and micro-batch count."""
    allowed, c = rules_for(req.target).schedules, req.constraints
    if mesh.pp == 1:
        out = [("1f1b", 1)]
    else:
        out = [(s, 1) for s in ("1f1b", "gpipe", "zb-h1") if s in allowed]
        if "interleaved-1f1b" in allowed and num_microbatches % mesh.pp == 0:
            units = pipeline_units(model)
            top = int(min(units, c.cap("vpp", req.max_vpp)))
            out += [("interleaved-1f1b", v) for v in range(2, top + 1) if units % (mesh.pp * v) == 0]
    if rules_for(req.target).runtime_schedules:
        out = [(s, v) for s, v in out if native_schedule_allowed(s, mesh.pp, num_microbatches, c.recompute)]
    if c.schedule is None and c.vpp is None:
        return out
    return [(s, v) for s, v in out if c.allows("schedule", s) and c.allows("vpp", v)]


_DEFAULTS = {name: field.default for name, field in ParallelConfig.model_fields.items() if name != "global_batch" and name != "seq_len"}


@dataclass(frozen=True)
class Option:
    """A base configuration (recompute none, default split) before it becomes a validated
    ``ParallelConfig``: the search enumerates tens of thousands, and only a few are evaluated."""

    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    vpp: int
    sp: bool
    zero: int
    micro_batch: int
    global_batch: int
    seq_len: int
    schedule: str
    attention: str
    tp_comm_overlap: bool = False
    precision: str = "bf16"
    stage_layers: tuple[int, ...] | None = None
    """The engine's own split where it differs from the default (DeepSpeed's partition)."""
    engine: str = "native"
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    compile: bool | None = None

    @property
    def num_microbatches(self) -> int:
        return self.global_batch // (self.micro_batch * self.dp)

    def to_config(self) -> ParallelConfig:
        """The validated configuration."""
        return ParallelConfig(**{f: getattr(self, f) for f in self.__dataclass_fields__})


for _name, _value in _DEFAULTS.items():  # every other ParallelConfig field at its default (recompute,
    if _name not in Option.__dataclass_fields__:  # byte sizes, overlap flags), read as a class attribute
        setattr(Option, _name, _value)
del _name, _value


def options(model: ModelSpec, cluster: ClusterSpec, mesh: Mesh, req: SearchRequest) -> Iterator[Option]:
    """Every base option of a mesh, in a fixed order."""
    rules, c = rules_for(req.target), req.constraints
    moe = any(b.is_moe for b in blocks(model))
    zeros = [z for z in range(4) if c.allows("zero", z) and zero_allowed(rules, z, mesh.pp, mesh.dp, mesh.cp, mesh.ep, moe)]
    split = _engine_split(model, mesh, rules.split)
    sequence = mesh.tp > 1 and model.has_sequence  # SP splits a sequence: none in a recommender or CNN
    splits = (req.seq_len // mesh.cp) % mesh.tp == 0  # SP splits each CP rank's tokens over tp (planner.estimation.config_checks)
    sps = [sp for sp in (rules.sequence_parallel if sequence else (False,)) if c.allows("sp", sp) and (splits or not sp)
           and not (sp and moe and not rules.moe_sequence_parallel)]
    attention = "eager" if "v100" in cluster.gpu.name else "flash"
    precisions = [x for x in req.precisions if x == "bf16" or cluster.gpu.peak_fp8_tflops is not None]
    tp_overlap = tp_overlap_allowed(rules, req.target, req.compile)
    for mb, precision in itertools.product(micro_batches(mesh, req), precisions):
        m = req.global_batch // (mb * mesh.dp)
        for schedule, vpp in schedules(model, mesh, m, req):
            for sp in sps:
                for zero in (z for z in zeros if native_zero_allowed(rules, schedule, mesh.pp, z)):
                    # Overlapping TP communication never costs more in the model (exposed time
                    # shrinks, hidden time pays only the overlap slowdown), so it is on where allowed.
                    overlap = sp and tp_overlap
                    yield Option(mesh.tp, mesh.pp, mesh.dp, mesh.cp, mesh.ep, vpp, sp, zero, mb, req.global_batch, req.seq_len, schedule, attention, overlap,
                                 precision, split if vpp == 1 else None, **engine_fields(req.target, zero), compile=req.compile)  # type: ignore[arg-type]


def _engine_split(model: ModelSpec, mesh: Mesh, kind: str) -> tuple[int, ...] | None:
    """The split the target's engine makes where it is not the default (one chunk per rank)."""
    if kind != "deepspeed" or mesh.pp == 1:
        return None
    sizes = deepspeed_stage_layers(model, mesh.pp)
    return None if sizes == default_stage_layers(model, mesh.pp) else sizes
