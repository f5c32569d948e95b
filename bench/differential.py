"""The differential sweep: seeded plans across the native space, each trained like one process or refused by a rule.

Draws ``--plans`` plans (``tests/planner/runtime/differential_draw.py``: a dense GQA Llama, a GPT-2
with learned positions and a tied head, a Mixtral-style MoE, a traced custom module and a ResNet-style
CNN without a sequence dimension; 1-8 ranks;
``meshplan plan`` with random constraints and ``meshplan estimate -o`` of random configurations:
tp, pp, dp, cp, ep, sp, ZeRO 0-3, every schedule, vpp, micro-batch counts from 1, recompute modes,
uneven stage splits), plus the issue's reproductions, trains each for three steps on CPU gloo
worlds as ``meshplan run`` does (bf16 compute, fp32 master weights where the CPU runs bf16) and compares
its losses with one process trained the same way (``tests/planner/runtime/equality.py`` ``BF16_RTOL``), and runs ``check-memory`` on it (an
error fails the plan; its figures are kept). Prints plans run / equal /
refused-with-rule / failed, and each failure's exact replay command (the models are written to
``--folder``, kept). Exit 1 when a plan failed.

Run: ``python bench/differential.py [--plans 300] [--seed 0] [--folder DIR] [--memory-only]`` (``--memory-only``:
the check-memory phase alone, on every drawn plan, in about 2 s a plan).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "planner" / "runtime")]


def main(argv: list[str] | None = None) -> int:
    from planner.noise import silence_third_party

    silence_third_party()
    from differential import check_memories, kinds, references, run_draws, summary
    from differential_draw import draws, reproductions, write_models

    from planner.runtime.memcheck.spread import spread_lines

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=300, help="random plans to draw (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    parser.add_argument("--folder", help="where the models and results go (default: a new temporary folder)")
    parser.add_argument("--memory-only", action="store_true",
                        help="check-memory on every drawn plan without training them (the memory phase alone)")
    args = parser.parse_args(argv)
    folder = Path(args.folder or tempfile.mkdtemp(prefix="meshplan-differential-"))
    (folder / "out").mkdir(parents=True, exist_ok=True)
    models = write_models(folder)
    start = time.perf_counter()
    drawn = reproductions(models) + draws(args.seed, args.plans, models)
    drew = time.perf_counter() - start
    if args.memory_only:
        return _memory_only(drawn, check_memories, spread_lines, start)
    outcomes = run_draws(drawn, references([d.model for d in drawn if d.plan_json]), folder / "out")
    ran = time.perf_counter()
    outcomes = check_memories(outcomes)
    counts = summary(outcomes)
    rules: dict[str, int] = {}
    for o in outcomes:
        if o.verdict == "refused":
            rule = o.detail.split("native rule ", 1)[-1].split(":", 1)[0]
            rules[rule] = rules.get(rule, 0) + 1
    print(f"plans {counts['plans']} (seed {args.seed}, {len(drawn) - args.plans} reproductions): run {counts['run']}, "
          f"equal {counts['equal']}, refused with a rule {counts['refused']}, failed {counts['failed']}")
    print("refusals by rule: " + (", ".join(f"{r} {n}" for r, n in sorted(rules.items())) or "none"))
    print("once refused, now run: " + (", ".join(f"{tag} {run} run, {equal} equal" for tag, (run, equal) in kinds(outcomes).items()) or "none"))
    checked = [o for o in outcomes if o.memory]
    print(f"check-memory: figures for {len(checked)} plans, {time.perf_counter() - ran:.0f} s; error (predicted / measured - 1) by rank kind:")
    for line in spread_lines(_checked(checked)):
        print("  " + line)
    print(f"drawing {drew:.0f} s, total {time.perf_counter() - start:.0f} s; models and results in {folder}")
    for o in outcomes:
        if o.verdict == "failed":
            print(f"FAILED {o.draw.name}: {o.detail}\n  replay: {o.replay(str(folder))}")
    return 1 if counts["failed"] else 0


def _memory_only(drawn: list, check_memories, spread_lines, start: float) -> int:
    """The check-memory phase alone: every drawn plan measured, none trained; the error spread of all
    plans and of the planner-chosen ones (``meshplan plan`` draws). Exit 1 when check-memory failed."""
    from differential import Outcome

    outcomes = check_memories([Outcome(d, "drawn") for d in drawn if d.plan_json])
    failed = [o for o in outcomes if o.verdict == "failed"]
    checked = [o for o in outcomes if o.memory]
    print(f"check-memory only: {len(outcomes)} plans, figures for {len(checked)}, failed {len(failed)}, {time.perf_counter() - start:.0f} s")
    for title, group in (("every plan", checked), ("planner-chosen plans", [o for o in checked if o.draw.origin == "plan"])):
        print(f"{title} ({len(group)}): error (predicted / measured - 1) by rank kind:")
        for line in spread_lines(_checked(group)):
            print("  " + line)
    for o in failed:
        print(f"FAILED {o.draw.name}: {o.detail}")
    return 1 if failed else 0


def _checked(outcomes: list) -> list:
    """Each outcome's check-memory figures as ``planner.runtime.memcheck.spread.Checked`` rows."""
    import json

    from planner.runtime.memcheck.spread import Checked

    rows = []
    for o in outcomes:
        pp = json.loads(o.draw.plan_json)["mesh"]["pp"]
        rows += [Checked(o.draw.name, r, pp, m, p) for r, m, p in o.memory if m]
    return rows


if __name__ == "__main__":
    sys.exit(main())
