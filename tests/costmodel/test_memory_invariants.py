"""The memory model's own invariants, per pipeline rank (issue 35), over 3,000 seeded random valid
configurations and a Hypothesis run, through the cost functions (not the CLI), and 3,000 more through
``estimate``'s result:

- activations grow with the micro-batch at a fixed count of micro-batches (so a fixed count in
  flight and the same peak phase); at a fixed global batch, what the forward's end holds (the
  in-flight activations and the transient), which ``estimate`` reports as the activations, grows;
  the peak's own activations (``activations_at_peak``) may fall when the peak moves to the end of a
  backward (``costmodel.rank_phases.peak_phase``; the BLOOM case below);
- ZeRO k+1 never holds more model state (parameters + gradients + optimizer states, with the
  gradients not yet produced and the gathered parameters freed by the peak, which the caching
  allocator keeps reserved: ``allocator_cache``; the embedding's transient full-vocabulary gradient
  under TP apart), nor more optimizer state, than ZeRO k (the peak of
  ZeRO 0-2 can fall where FSDP2 has freed most gathered parameters, ZeRO 3's where it holds every
  gradient: ``costmodel.rank_memory._backward_end_bytes``);
- more recomputation never adds memory.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import planner
from costmodel.rank_memory import FRAGMENTATION, forward_end_activation_bytes, largest_activation_bytes, rank_parts
from costmodel.specs import ParallelConfig
from costmodel.step import StepEstimate, estimate_step
from costmodel.table import build_cost_table
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg
from planner.estimation.config_checks import parallel_problems
from planner.estimation.result import result_from_step

NAMES = ("llama3.1-8b", "mpt-13b", "mixtral-8x7b", "bloom-176b")
CLUSTER = resolve_cluster_arg("dgx-h100")
TABLES = {n: build_cost_table(resolve_model_arg(n), CLUSTER) for n in NAMES}
RECOMPUTE = ("none", "selective", "full")
STATE = ("params", "grads", "optimizer_states")
TOL = 1e-9


def _ranks(name: str, cfg: ParallelConfig) -> list[dict[str, float]]:
    """Each pipeline rank's allocated bytes by category."""
    table = TABLES[name]
    step = estimate_step(table, cfg)
    return [rank_parts(table, cfg, step.ranks.rank(r), r)[0] for r in range(cfg.pp)]


def _states(name: str, cfg: ParallelConfig) -> list[tuple[float, float]]:
    """Each pipeline rank's (model state with the allocator's cache of freed and unproduced state, optimizer states),
    less the embedding's full-vocabulary gradient under TP where the peak holds it: a backward transient every
    ZeRO stage makes, booked among the gradients (``costmodel.rank_memory._tp_embedding_grad_bytes``) and in the
    allocator's slack with the activations (``FRAGMENTATION * (activations + embedding gradient)``)."""
    table = TABLES[name]
    step = estimate_step(table, cfg)
    parts = [rank_parts(table, cfg, step.ranks.rank(r), r) for r in range(cfg.pp)]
    transient = [g["allocator_slack"] / FRAGMENTATION - a["activations"] for a, g in parts]
    return [(sum(a[k] for k in STATE) + g["allocator_cache"] - e, a["optimizer_states"]) for (a, g), e in zip(parts, transient)]


def _forward_end(name: str, cfg: ParallelConfig) -> list[float]:
    """What each rank holds of activations at the end of its forwards: in-flight and transient."""
    step = estimate_step(TABLES[name], cfg)
    return [forward_end_activation_bytes(cfg, step.ranks.rank(r), r) for r in range(cfg.pp)]


def _largest(name: str, cfg: ParallelConfig, step: StepEstimate | None = None) -> list[float]:
    """What ``estimate`` reports as each rank's activations (:func:`largest_activation_bytes`);
    ``step``: ``cfg``'s estimate where the caller has it already."""
    table = TABLES[name]
    step = step or estimate_step(table, cfg)
    return [largest_activation_bytes(table, cfg, step.ranks.rank(r), r) for r in range(cfg.pp)]


def _valid(name: str, fields: dict) -> ParallelConfig | None:
    try:
        cfg = ParallelConfig(**fields)
    except ValueError:
        return None
    return None if parallel_problems(TABLES[name].model, cfg, cfg.num_gpus) else cfg


def _draw(rng: random.Random) -> tuple[str, dict]:
    pp = rng.choice([1, 2, 3, 4])
    schedule = rng.choice(["1f1b", "gpipe", "interleaved-1f1b"]) if pp > 1 else "1f1b"
    tp = rng.choice([1, 2, 4, 8])
    fields = dict(tp=tp, pp=pp, cp=rng.choice([1, 2, 4]), dp=rng.choice([1, 2, 3, 4, 8]), zero=rng.choice([0, 1, 2, 3]),
                  recompute=rng.choice(RECOMPUTE), micro_batch=rng.choice([1, 2, 4]), seq_len=rng.choice([1024, 2048, 4096]),
                  schedule=schedule, vpp=2 if schedule == "interleaved-1f1b" else 1, sp=tp > 1)
    fields["global_batch"] = fields["micro_batch"] * fields["dp"] * rng.choice([1, 2, 4, 8])
    return rng.choice(NAMES), fields


def _violations(name: str, cfg: ParallelConfig, prop: int) -> list[str]:
    """Violations of property ``prop`` (0 micro-batch at a fixed micro-batch count, 1 ZeRO, 2 recompute,
    3 micro-batch at a fixed global batch) from ``cfg``."""
    base = _ranks(name, cfg)
    if prop == 0:
        bigger = _valid(name, {**cfg.model_dump(), "micro_batch": 2 * cfg.micro_batch, "global_batch": 2 * cfg.global_batch})
        if bigger is None:
            return []
        return [f"rank {r}: activations {a['activations']:.4g} -> {b['activations']:.4g} B at micro-batch x2"
                for r, (a, b) in enumerate(zip(base, _ranks(name, bigger))) if b["activations"] < a["activations"] * (1 - TOL)]
    if prop == 1:
        more = _valid(name, {**cfg.model_dump(), "zero": cfg.zero + 1}) if cfg.zero < 3 else None
        if more is None:
            return []
        return [f"rank {r}: zero {cfg.zero} -> {cfg.zero + 1}: state {a[0]:.4g} -> {b[0]:.4g} B"
                for r, (a, b) in enumerate(zip(_states(name, cfg), _states(name, more)))
                if b[0] > a[0] * (1 + TOL) or b[1] > a[1] * (1 + TOL)]
    if prop == 3:
        bigger = _valid(name, {**cfg.model_dump(), "micro_batch": 2 * cfg.micro_batch})
        if bigger is None:
            return []
        return [f"rank {r}: reported activations {a:.4g} -> {b:.4g} B at micro-batch x2, global batch fixed"
                for r, (a, b) in enumerate(zip(_largest(name, cfg), _largest(name, bigger))) if b < a * (1 - TOL)]
    i = RECOMPUTE.index(cfg.recompute)
    if i == 2:
        return []
    heavier = cfg.model_copy(update={"recompute": RECOMPUTE[i + 1]})
    return [f"rank {r}: {cfg.recompute} -> {heavier.recompute}: {sum(a.values()):.4g} -> {sum(b.values()):.4g} B"
            for r, (a, b) in enumerate(zip(base, _ranks(name, heavier))) if sum(b.values()) > sum(a.values()) * (1 + TOL)]


def test_three_thousand_seeded_configurations_obey_the_invariants() -> None:
    rng, checked, bad = random.Random(31), 0, []
    while checked < 3000:
        name, fields = _draw(rng)
        cfg = _valid(name, fields)
        if cfg is None:
            continue
        bad += [f"{name} {fields}: {v}" for v in _violations(name, cfg, checked % 4)]
        checked += 1
    assert not bad, f"{len(bad)} violations, first: {bad[:3]}"


def test_forward_end_activations_grow_with_the_micro_batch_at_a_fixed_global_batch() -> None:
    rng, checked = random.Random(35), 0
    while checked < 300:
        name, fields = _draw(rng)
        fields["micro_batch"], fields["global_batch"] = 1, 2 * fields["dp"]
        small, big = _valid(name, fields), _valid(name, {**fields, "micro_batch": 2})
        if small is None or big is None:
            continue
        checked += 1
        for r, (a, b) in enumerate(zip(_forward_end(name, small), _forward_end(name, big))):
            assert b >= a * (1 - TOL), f"{name} {fields}: rank {r} {a:.4g} -> {b:.4g} B"


def test_bloom_case_is_monotone() -> None:
    """issue 35's case: ``estimate --model bloom-176b --gpus 1 --global-batch 2 --seq-len 2048``. The
    activations ``estimate`` reports (the most the GPU holds, the end of its forwards) double from
    micro-batch 1 to 2. The peak's own activations need not: at micro-batch 2 the step has one
    micro-batch and peaks after its forward (the end of its backward), the activations freed, and
    says so; at micro-batch 1 the peak holds at most the activations reported."""
    one, two = (planner.estimate(model="bloom-176b", cluster="dgx-a100", gpus=1, global_batch=2, seq_len=2048, micro_batch=mb)
                for mb in (1, 2))
    a, b = one.memory_breakdown_gib, two.memory_breakdown_gib
    assert b.activations == pytest.approx(2 * a.activations, rel=0.01)
    assert b.activations_at_peak < b.activations and a.activations_at_peak <= a.activations
    assert any(n.startswith(("memory peaks at the end of the backward pass", "memory peaks in the optimizer update"))
               for n in two.assumptions)


def test_estimated_activations_grow_with_the_micro_batch_at_a_fixed_global_batch() -> None:
    """What ``estimate`` reports as a rank's activations (issue 35 drew 3,000 configurations there:
    :func:`largest_activation_bytes` of the peak rank) never falls on any rank when the micro-batch
    doubles at a fixed global batch. The peak rank itself can change between the two (a near tie of
    stages), so the property is per rank."""
    rng, checked = random.Random(36), 0
    while checked < 3000:
        name, fields = _draw(rng)
        fields["micro_batch"], fields["global_batch"] = 1, fields["dp"] * rng.choice([2, 4, 8])
        small, big = _valid(name, fields), _valid(name, {**fields, "micro_batch": 2})
        if small is None or big is None:
            continue
        checked += 1
        steps = [estimate_step(TABLES[name], cfg) for cfg in (small, big)]
        sizes = [_largest(name, small, steps[0]), _largest(name, big, steps[1])]
        for cfg, step, largest in zip((small, big), steps, sizes):
            shown = result_from_step(TABLES[name], cfg, step, [])
            assert shown.memory_breakdown_gib.activations * 2**30 == largest[shown.memory_breakdown_rank]
        for r, (a, b) in enumerate(zip(*sizes)):
            assert b >= a * (1 - TOL), f"{name} {fields}: rank {r} {a:.4g} -> {b:.4g} B"


CONFIGS = st.fixed_dictionaries({
    "name": st.sampled_from(NAMES), "tp": st.sampled_from([1, 2, 4, 8]), "pp": st.sampled_from([1, 2, 3, 4]),
    "cp": st.sampled_from([1, 2, 4]), "dp": st.sampled_from([1, 2, 3, 8]), "zero": st.sampled_from([0, 1, 2, 3]),
    "recompute": st.sampled_from(RECOMPUTE), "micro_batch": st.sampled_from([1, 2, 4]), "seq_len": st.sampled_from([1024, 4096]),
    "schedule": st.sampled_from(["1f1b", "gpipe", "interleaved-1f1b"]), "count": st.sampled_from([1, 2, 4, 8]),
    "prop": st.sampled_from([0, 1, 2, 3]),
})


@settings(database=None, deadline=None, max_examples=300)
@given(c=CONFIGS)
def test_the_invariants_hold_over_the_space(c: dict) -> None:
    fields = {k: v for k, v in c.items() if k not in ("name", "count", "prop")}
    if fields["pp"] == 1:
        fields["schedule"] = "1f1b"
    fields.update(vpp=2 if fields["schedule"] == "interleaved-1f1b" else 1, sp=fields["tp"] > 1,
                  global_batch=fields["micro_batch"] * fields["dp"] * c["count"])
    cfg = _valid(c["name"], fields)
    if cfg is not None:
        assert not _violations(c["name"], cfg, c["prop"])
