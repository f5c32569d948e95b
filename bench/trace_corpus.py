"""One line per model of the trace corpus (``tests/planner/intake/trace/corpus``, issue 12).

    python bench/trace_corpus.py [--only NAME ...] [--no-plan]

One markdown row per model: the small configuration traced and run for real on CPU (trace time,
parameters against ``sum(p.numel())``, forward-FLOP error against torch's FlopCounterMode, or against
the entry's written formula where FlopCounterMode counts other work, noted below the table), the layer kinds
recognised, the full-size model's step time and peak memory against its twin (preset or config
read as numbers) at tp 2 x pp 2 on 16 A100s and tp 2 x pp 4 on 64 (worst of the two), and whether
``meshplan plan`` finds a plan that the plan validator accepts (16 A100s unless the entry says more).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "planner" / "intake" / "trace" / "corpus"))

import catalog  # noqa: E402

import planner  # noqa: E402
from planner.intake.arguments import resolve_model_arg  # noqa: E402
from planner.intake.trace import trace_module  # noqa: E402
from planner.intake.trace.load import hf_model, load_factory  # noqa: E402

MICRO_BATCH, SEQ = 2, 32
SETTINGS = (dict(gpus=16, tp=2, pp=2), dict(gpus=64, tp=2, pp=4))


def _small(entry: catalog.Entry, folder: Path) -> tuple[str, str, str, str]:
    start = time.perf_counter()
    if entry.hf:
        module, make_inputs, _ = hf_model(str(catalog.hf_config_path(entry, True, folder)))
    else:
        module, make_inputs = load_factory(catalog.factory_arg(entry, True))
    trace = trace_module(module, make_inputs, name=entry.name, micro_batch=MICRO_BATCH, seq_len=SEQ)
    seconds = time.perf_counter() - start
    real, real_inputs = catalog.small_real(entry, folder)
    exact = trace.params == sum(p.numel() for p in real.parameters())
    flops = trace.fwd_flops / catalog.reference_for(entry, real, real_inputs, MICRO_BATCH, SEQ) - 1
    kinds = Counter(layer.kind for layer in trace.spec.layers)
    flop_cell = f"{flops:+.2%}" + (" (formula)" if entry.reference_note else "")
    return (f"{seconds:.2f}", "exact" if exact else f"{trace.params:,} vs {sum(p.numel() for p in real.parameters()):,}",
            flop_cell, " ".join(f"{k}:{n}" for k, n in sorted(kinds.items())))


def _twin(entry: catalog.Entry, folder: Path) -> str:
    twin = catalog.twin_arg(entry, folder)
    if twin is None:
        return "no twin"
    arg, trace = catalog.model_arg(entry, folder)
    traced, reference = resolve_model_arg(arg, trace), resolve_model_arg(twin)
    worst_t = worst_m = 0.0
    for s in SETTINGS:
        run = dict(cluster="dgx-a100", global_batch=s["gpus"] * 2, seq_len=entry.twin_seq_len, **s)
        got, want = planner.estimate(model=traced, **run), planner.estimate(model=reference, **run)
        worst_t = max(worst_t, abs(got.step_time_s / want.step_time_s - 1))
        worst_m = max(worst_m, abs(got.peak_memory_gib / want.peak_memory_gib - 1))
    return f"time {worst_t:.2%}, memory {worst_m:.2%} vs {Path(twin).parent.name if '/' in twin else twin}"


def _plan(entry: catalog.Entry, folder: Path) -> str:
    from planner.plans.plan_checks import plan_problems

    arg, trace = catalog.model_arg(entry, folder)
    try:
        plan = planner.plan(model=arg, trace=trace, cluster="dgx-a100", top_k=1, time_limit_s=20,
                            **({"gpus": 16} | entry.plan))
    except planner.InputError as err:
        return f"exit 2: {err}"
    except planner.NoFeasiblePlanError as err:
        return f"exit 3: {err}"
    problems = plan_problems(plan)
    m = plan.mesh
    status = "valid" if not problems else f"INVALID: {problems[0]}"
    return f"plan tp{m.tp} pp{m.pp} dp{m.dp} cp{m.cp} sp={int(m.sp)} {status}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="corpus model names")
    parser.add_argument("--no-plan", action="store_true", help="skip the plan column")
    args = parser.parse_args()
    entries = [e for e in catalog.ENTRIES if not args.only or e.name in args.only]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        header = ["model", "trace s", "params", "FLOPs vs FlopCounterMode", "layer kinds", "twin error, worst of two"]
        header += [] if args.no_plan else ["plan"]
        print("| " + " | ".join(header) + " |\n|" + "---|" * len(header), flush=True)
        for entry in entries:
            cells = [entry.name, *_small(entry, folder), _twin(entry, folder)]
            if not args.no_plan:
                cells.append(_plan(entry, folder))
            print("| " + " | ".join(cells) + " |", flush=True)
        notes = [f"{e.name}: {e.reference_note}" for e in entries if e.reference_note]
        if notes:
            print("\n(formula) " + "; ".join(notes))


if __name__ == "__main__":
    main()
