"""Plans of a chosen shape: the constraints of ``meshplan plan --tp 2 --pp 1..4 ...`` and
``planner.plan(tp=2, pp=(1, 4), ...)``, read, checked and echoed in the plan's ``request``.

An integer dimension (tp, pp, cp, dp, ep, vpp, zero, micro-batch) is fixed by one value or bounded by
an inclusive range: ``"1..4"``, ``"2.."`` (no upper bound) or ``"..4"`` on the command line; an int,
a ``(lo, hi)`` tuple (``hi`` None for no upper bound) or the same string in the API. ``sp`` is a
bool, ``recompute`` one mode for every recomputable layer, ``schedule`` one pipeline schedule name.

:func:`read_constraints` (and :func:`read_grid_constraints` for a sweep, whose points check
:func:`job_problems` one by one) turns the user's values into :class:`PlanConstraints` and raises one
:class:`~planner.errors.InputError` with every problem: malformed values, and constraints that
contradict each other or the job on their face, each clause printing its factors (torchtitan style:
``tp 8 x pp 4 x cp 2 = 64 does not divide 48 GPUs``). Constraints that are well formed but leave no
configuration are the search's to report (exit 3, naming the nearest configuration).
:func:`constraint_problems` is the validator's check that a configuration keeps them; it imports
nothing from ``search``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from costmodel.specs import ModelSpec, ParallelConfig, TransformerLayer
from planner.errors import InputError

Bounds = tuple[int, int | None]
INT_DIMS = ("tp", "pp", "cp", "dp", "ep", "vpp", "zero", "micro_batch")
RECOMPUTE = ("none", "selective", "full")
SCHEDULES = ("1f1b", "interleaved-1f1b", "gpipe", "zb-h1")


class PlanConstraints(BaseModel):
    """Dimensions fixed or bounded by the user (None: searched). Integer dimensions are inclusive
    ``[lowest, highest]`` ranges, ``highest`` null for no upper bound; a fixed value is ``[v, v]``."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    tp: Bounds | None = None
    pp: Bounds | None = None
    cp: Bounds | None = None
    dp: Bounds | None = None
    ep: Bounds | None = None
    vpp: Bounds | None = None
    zero: Bounds | None = None
    micro_batch: Bounds | None = None
    sp: bool | None = None
    recompute: Literal["none", "selective", "full"] | None = None
    """One recompute mode for every recomputable layer."""
    schedule: Literal["1f1b", "interleaved-1f1b", "gpipe", "zb-h1"] | None = None

    def is_empty(self) -> bool:
        """No dimension is constrained."""
        return all(v is None for v in self.model_dump().values())

    def fixed(self, name: str) -> int | None:
        """The value an integer dimension is fixed to, or None when it is free or a range."""
        want = getattr(self, name)
        return want[0] if want is not None and want[0] == want[1] else None


def parse_bounds(name: str, value: Any) -> Bounds | None:
    """One integer dimension's value as (lo, hi); raises ``InputError`` naming the flag."""
    flag = name.replace("_", "-")
    if value is None:
        return None
    lo, hi = _split(flag, value)
    least = 0 if name == "zero" else 1
    if lo < least or (hi is not None and hi < least):
        raise InputError(f"{flag} {_show(value)}: values must be integers of at least {least}")
    if hi is not None and hi < lo:
        raise InputError(f"{flag} {_show(value)}: the range is empty (write it lowest..highest, e.g. {hi}..{lo})")
    if name == "zero" and max(lo, hi if hi is not None else 3) > 3:
        raise InputError(f"zero {_show(value)}: ZeRO stages are 0, 1, 2 and 3")
    return lo, hi


def _split(flag: str, value: Any) -> tuple[int, int | None]:
    bad = InputError(f"{flag} {_show(value)}: give an integer, or a range such as 1..4 (lo..hi, lo.. or ..hi)")
    if _is_int(value):
        return value, value
    if isinstance(value, (tuple, list)) and len(value) == 2 and _is_int(value[0]) and (value[1] is None or _is_int(value[1])):
        return value[0], value[1]
    if not isinstance(value, str):
        raise bad
    lo_text, sep, hi_text = value.strip().partition("..")
    try:
        if not sep:
            return int(lo_text), int(lo_text)
        return (int(lo_text) if lo_text else (0 if flag == "zero" else 1)), (int(hi_text) if hi_text else None)
    except ValueError:
        raise bad from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value: Any) -> str:
    """A value as the command line spells it: ``4``, ``1..4``, ``2..``."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        lo, hi = value
        return str(lo) if lo == hi else f"{lo}..{'' if hi is None else hi}"
    return str(value)


def read_constraints(model: ModelSpec, gpus: int, global_batch: int, target: str, **values: Any) -> PlanConstraints:
    """The constraints in ``values`` (keyword names as in :class:`PlanConstraints`), checked against
    the job; raises ``InputError`` with every problem at once."""
    return _read(model, target, (gpus, global_batch), values)


def read_grid_constraints(model: ModelSpec, target: str, **values: Any) -> PlanConstraints:
    """:func:`read_constraints` for a sweep, whose points have their own GPU counts and batches:
    everything but :func:`job_problems`, which each point checks for itself."""
    return _read(model, target, None, values)


def _read(model: ModelSpec, target: str, job: tuple[int, int] | None, values: dict[str, Any]) -> PlanConstraints:
    problems: list[str] = []
    fields: dict[str, Any] = {}
    for name in INT_DIMS:
        try:
            fields[name] = parse_bounds(name, values.get(name))
        except InputError as err:
            problems += err.problems
    for name, allowed in (("recompute", RECOMPUTE), ("schedule", SCHEDULES)):
        value = values.get(name)
        if value is not None and value not in allowed:
            problems.append(f"{name} {value!r} is not one of {', '.join(allowed)}")
        fields[name] = value if value in allowed else None
    if values.get("sp") is not None and not isinstance(values["sp"], bool):
        problems.append(f"sp must be True, False or None (got {values['sp']!r})")
    fields["sp"] = values.get("sp") if isinstance(values.get("sp"), bool) else None
    if problems:
        raise InputError(*problems)
    c = PlanConstraints(**fields)
    problems = (job_problems(c, *job) if job else []) + _model_problems(c, model) + _shape_problems(c) + _target_problems(c, target, model)
    if problems:
        raise InputError(*problems)
    return c


def job_problems(c: PlanConstraints, gpus: int, global_batch: int) -> list[str]:
    """Fixed degrees tile the GPUs and divide the batch, and the micro-batch fits a replica's share."""
    out = []
    fixed = {k: c.fixed(k) for k in ("dp", "tp", "pp", "cp") if c.fixed(k) is not None}
    product = math.prod(fixed.values())
    factors = " x ".join(f"{k} {v}" for k, v in fixed.items())
    if len(fixed) == 4 and product != gpus:
        out.append(f"{factors} = {product} != {gpus} GPUs (fix at most three of dp, tp, pp, cp, or make them multiply to {gpus})")
    elif fixed and gpus % product:
        shown = f"{factors} = {product}" if len(fixed) > 1 else factors
        out.append(f"{shown} does not divide {gpus} GPUs (pick degrees whose product divides the GPU count)")
    dp, mb = c.fixed("dp"), c.micro_batch
    if dp is not None and global_batch % dp:
        out.append(f"dp {dp} does not divide the global batch {global_batch}")
    elif mb is not None and mb[0] > global_batch // (dp or 1):
        out.append(f"micro-batch {mb[0]} exceeds the {global_batch // (dp or 1)} sequences per replica (global batch {global_batch} / dp {dp or 1})")
    elif dp is not None and c.fixed("micro_batch") and (global_batch // dp) % c.fixed("micro_batch"):
        out.append(f"micro-batch {c.fixed('micro_batch')} does not divide the {global_batch // dp} sequences per replica "
                   f"(global batch {global_batch} / dp {dp})")
    return out


def _model_problems(c: PlanConstraints, model: ModelSpec) -> list[str]:
    """A fixed tp divides the heads, pp fits the blocks, ep divides the experts."""
    out = []
    blocks = [x for x in model.layers if isinstance(x, TransformerLayer)]
    tp = c.fixed("tp")
    for heads in sorted({b.num_heads for b in blocks} | {b.num_kv_heads for b in blocks}):
        if tp is not None and heads % tp:
            out.append(f"tp {tp} does not divide {heads} attention (or KV) heads (pick a tp that divides {heads})")
    units = len(blocks) or len(model.layers)
    if c.pp is not None and c.pp[0] > units:
        out.append(f"pp {c.pp[0]} exceeds the {units} layers a pipeline splits (use pp at most {units})")
    experts = sorted({b.num_experts for b in blocks if b.is_moe})
    if c.ep is not None and c.ep[0] > 1 and not experts:
        out.append(f"ep {c.ep[0]} needs a mixture-of-experts model ({model.name} has no experts; use ep 1)")
    out += [f"ep {c.fixed('ep')} does not divide {n} experts" for n in experts if c.fixed("ep") and n % c.fixed("ep")]
    return out


def _shape_problems(c: PlanConstraints) -> list[str]:
    """SP, interleaving and schedules that contradict the degrees."""
    out = []
    if c.sp and c.tp is not None and c.tp[1] == 1:
        out.append("sp needs tp > 1 (tp 1 given; drop --sp or raise tp)")
    if c.vpp is not None and c.vpp[0] > 1 and c.schedule not in (None, "interleaved-1f1b"):
        out.append(f"vpp {c.vpp[0]} needs schedule interleaved-1f1b (schedule {c.schedule} given)")
    if c.schedule == "interleaved-1f1b" and c.vpp is not None and c.vpp[1] == 1:
        out.append("schedule interleaved-1f1b needs vpp > 1 (vpp 1 given)")
    pipelined = (c.vpp is not None and c.vpp[0] > 1) or c.schedule not in (None, "1f1b")
    if pipelined and c.pp is not None and c.pp[1] == 1:
        what = f"vpp {c.vpp[0]}" if c.vpp is not None and c.vpp[0] > 1 else f"schedule {c.schedule}"
        out.append(f"{what} needs pp > 1 (pp 1 given)")
    return out


def _target_problems(c: PlanConstraints, target: str, model: ModelSpec) -> list[str]:
    """Constraints the target engine cannot express (``search.targets``)."""
    from planner.plans.native_rules import native_rule
    from search.targets import rules_for

    rules, out = rules_for(target), []
    if c.recompute is not None and c.recompute not in rules.recompute_modes:
        out.append(f"{target} recomputes {' or '.join(rules.recompute_modes)}, not recompute {c.recompute} (it checkpoints whole layers)")
    moe = any(isinstance(x, TransformerLayer) and x.is_moe for x in model.layers)
    if moe and c.zero is not None and not any(c.zero[0] <= z <= (3 if c.zero[1] is None else c.zero[1]) for z in rules.moe_zero):
        out.append(f"{target} refuses mixture-of-experts layers under zero {_show(c.zero)} (use zero {max(rules.moe_zero)} or less)")
    if c.schedule is not None and c.schedule not in rules.schedules:
        out.append(f"{target} runs {' or '.join(rules.schedules)}, not schedule {c.schedule}")
    zeros = set(rules.zero) | set(rules.zero_with_pp)
    if c.zero is not None and not any(c.zero[0] <= z <= (3 if c.zero[1] is None else c.zero[1]) for z in zeros):
        out.append(f"{target} shards with zero {' or '.join(map(str, sorted(zeros)))}, not zero {_show(c.zero)}")
    if c.recompute is not None and c.recompute not in rules.recompute_modes:
        out.append(f"{target} recomputes {' or '.join(rules.recompute_modes)}, not recompute {c.recompute}")
    if not rules.context_parallel and c.cp is not None and c.cp[0] > 1:
        out.append(f"{target} has no context parallelism (cp {_show(c.cp)} given)")
    if not rules.expert_parallel and moe and c.ep is not None and c.ep[0] > 1:
        out.append(f"{target} has no expert parallelism (ep {_show(c.ep)} given)")
    if target == "native" and c.schedule == "zb-h1" and c.recompute == "selective":
        out.append(native_rule("native-zb-h1-selective", "recompute selective given"))
    if target == "native" and c.schedule == "zb-h1" and c.zero is not None and c.zero[0] == 3:
        out.append(native_rule("native-zb-h1-zero3", "zero 3 given"))
    if c.sp is not None and c.sp not in rules.sequence_parallel and (c.sp or (c.tp is not None and c.tp[0] > 1)):
        out.append(f"{target} {'never applies' if c.sp else 'always applies'} sequence parallelism with tp > 1 ({'--sp' if c.sp else '--no-sp'} given)")
    return out


def constraint_problems(c: PlanConstraints | None, cfg: ParallelConfig, recompute_modes: list[str]) -> list[str]:
    """Where ``cfg`` breaks the constraints; ``recompute_modes`` are the modes of its recomputable
    layers (the validator's ``layer_modes``)."""
    if c is None:
        return []
    out = []
    for name in INT_DIMS:
        want, have = getattr(c, name), getattr(cfg, name)
        if want is not None and not (want[0] <= have and (want[1] is None or have <= want[1])):
            out.append(f"{name.replace('_', '-')} {have} breaks the constraint {name.replace('_', '-')} {_show(want)}")
    if c.sp is not None and cfg.sp != c.sp:
        out.append(f"sp {cfg.sp} breaks the constraint {'--sp' if c.sp else '--no-sp'}")
    if c.schedule is not None and cfg.schedule != c.schedule:
        out.append(f"schedule {cfg.schedule} breaks the constraint schedule {c.schedule}")
    broken = sorted({m for m in recompute_modes if m != c.recompute}) if c.recompute else []
    if broken:
        out.append(f"layers recompute {', '.join(broken)}, breaking the constraint recompute {c.recompute}")
    return out
