"""Invariants that hold per pipeline rank, over generated configurations (issue 13, item 5): more
recomputation never raises any rank's activation memory, and the memory breakdown names the rank
it describes (the most-loaded one, which moves between configurations)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.step import estimate_step
from costmodel.table import build_cost_table
from planner.errors import InputError
from planner.estimation.estimate import build_config
from planner.estimation.result import result_from_step
from planner.intake.arguments import resolve_cluster_arg, resolve_model_arg

from fuzzkit import FUZZ

MODELS = {name: resolve_model_arg(name) for name in ("llama3.1-8b", "gpt3-175b", "mixtral-8x7b")}
CLUSTER = resolve_cluster_arg("dgx-h100")
TABLES = {name: build_cost_table(spec, CLUSTER) for name, spec in MODELS.items()}
CONFIGS = st.fixed_dictionaries({
    "model": st.sampled_from(sorted(MODELS)), "tp": st.sampled_from([1, 2, 8]), "pp": st.sampled_from([1, 2, 4, 8]),
    "cp": st.sampled_from([1, 2]), "micro_batch": st.sampled_from([1, 2, 4]), "zero": st.sampled_from([0, 1, 2, 3]),
    "seq_len": st.sampled_from([1024, 4096, 16384]), "dp": st.sampled_from([1, 2, 4]),
})


def _steps(c: dict) -> dict[str, object] | None:
    spec, table = MODELS[c["model"]], TABLES[c["model"]]
    gpus = c["tp"] * c["pp"] * c["cp"] * c["dp"]
    out = {}
    for mode in ("none", "selective", "full"):
        try:
            cfg, _ = build_config(spec, CLUSTER, gpus, tp=c["tp"], pp=c["pp"], cp=c["cp"], micro_batch=c["micro_batch"], zero=c["zero"],
                                  global_batch=c["micro_batch"] * c["dp"] * 8, seq_len=c["seq_len"], recompute=mode, sp=None, schedule=None, attention=None)
        except InputError:
            return None
        out[mode] = (cfg, estimate_step(table, cfg))
    return out


@settings(FUZZ, max_examples=60)
@given(c=CONFIGS)
def test_more_recomputation_never_raises_a_ranks_activation_memory(c) -> None:
    steps = _steps(c)
    if steps is None:
        return
    acts = {mode: [parts["activations"] for parts in step.rank_memory_breakdown_gib] for mode, (_, step) in steps.items()}
    for less, more in (("none", "selective"), ("selective", "full")):
        for rank, (a, b) in enumerate(zip(acts[less], acts[more])):
            assert b <= a * (1 + 1e-9) + 1e-12, f"{c}: rank {rank} activations {a:.4f} GiB with {less}, {b:.4f} GiB with {more}"


@settings(FUZZ, max_examples=30)
@given(c=CONFIGS)
def test_the_breakdown_names_the_rank_it_describes(c) -> None:
    steps = _steps(c)
    if steps is None:
        return
    for cfg, step in steps.values():
        result = result_from_step(TABLES[c["model"]], cfg, step, [])
        rank = result.pipeline_ranks[result.memory_breakdown_rank]
        assert rank.memory_gib == max(r.memory_gib for r in result.pipeline_ranks) == result.peak_memory_gib
        parts = result.memory_breakdown_gib.model_dump()
        assert math.isclose(sum(parts.values()) - parts["activations"], result.peak_memory_gib, rel_tol=1e-9)
        assert parts["activations"] >= parts["activations_at_peak"]
