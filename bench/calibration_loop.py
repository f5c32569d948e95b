"""The whole measure -> run -> calibrate loop on CPU (issue 10): held-out step-time error after calibration.

Usage: python bench/calibration_loop.py [--ranks 2] [--out DIR] [--steps 6] [--warmup 2] [--quick] [--params A,B,...]

1. ``meshplan profile --device cpu`` on ``--ranks`` gloo processes (torchrun) writes a CPU cluster file;
2. plans of tiny Llamas (two widths, from config.json files written into DIR) on that cluster, each
   fixed to a shape with ``meshplan plan``'s constraints, run with ``meshplan run --nproc-per-node G``
   (torchrun for G > 1, in process for one rank) and give run records;
3. ``meshplan calibrate`` on the records of the FIT shapes; the HELD-OUT shapes (other batch, sequence
   and split combinations, never in the fit) are predicted with the calibrated cluster.

Prints per run the measured step and the error before (profiled cluster) and after calibration, then
the mean / max error before, after (in-sample), under leave-one-shape-out cross-validation of the fit
runs, and on the held-out runs, against the 20 % target. Timing noise from other processes on the
machine goes straight into these figures.

Last run (2 gloo ranks, 5 steps after 1 warm-up, on the shared 2-core development machine at load
average 13-20): before 38.4 % mean over all 12 runs (28.8 % on the 4 held-out); after, in-sample
26.3 %; leave-one-shape-out 38.8 %; held-out 34.5 % mean, 86.6 % max: the 20 % target was NOT met
there. The pipeline-parallel runs ran 1.5-2.5x faster relative to the data/tensor-parallel ones than
the cost model says (two processes sharing two loaded cores), and the same shape's steps spread
33-54 %; the non-pipelined held-out runs came to +13 %, -11 % and +28 %.

Run of 1 Dec 2026 (6 steps after 2 warm-ups, load average 4-8 from other sessions): before 57.0 %
mean over all runs (61.1 % on the held-out), after 30.3 % in-sample, 54.2 % leave-one-shape-out,
131.2 % held out: NOT met, and the figures are set by the machine's load, not by the model. The same
plan measured 0.131 s inside the loop and 0.255 s minutes later alone (llama-256, pp 2); the
one-process llama-256 shape 0.318 s in the loop and 0.17-0.20 s alone (MemTracker on the first step
was ruled out: with and without it the medians agree within that noise). What the two-process runs
have that one-process runs do not is a wait at every blocking collective for the peer process to be
scheduled on the shared cores (DP +250 %, TP +460 %, PP +150 % over the profiled cluster in that
run, in the order of their collectives per step); ``--params compute,memory,overhead,latency,step_fixed``
fits it as the per-hop ``latency`` factor (41x the profiled 1.5 ms hop: about 60 ms per collective),
which brought the held-out error of that run to 102 % (in-sample 30.4 %, leave-one-shape-out 55.4 %):
still far from the target on a machine this loaded.

Run of 1 Dec 2026 at low load (load average 1-3): before 52.0 % over all runs (48.2 % on the 4
held-out); after 22.3 % in-sample, 62.2 % leave-one-shape-out, 19.6 % held out (met, barely; the TP
runs stay 59-63 % under). With ``--params compute,memory,overhead,latency,step_fixed`` on the same
records: 21.5 % in-sample, leave-one-shape-out 28.5 % (from 62.2 %), held out 24.6 % (latency 14.5x
the profiled hop). What remains is visible in its residuals: the data-parallel runs come out 39-54 %
under and the pipeline runs 55-59 % over, because the cost model reduces gradients in Megatron's
40M-parameter buckets (one collective for these models) where the native runtime's FSDP2 reduces
once per layer unit, and counts 2(pp - 1) + 2m pipeline hops each paying the fitted latency. Counting
the runtime's own collectives per step is the next fix; not done.

Runs of 1 Dec 2026 on an idle machine, after the block's memory-bound backward was counted op by op
and the optimizer's gradient passes added: held out 15.7 % and 24.4 % (before calibration 52.2 % and
43.8 % over all runs; in-sample 16.6 % and 13.2 %; leave-one-shape-out 40.7 % and 35.4 %). The
tensor-parallel runs come out 23-52 % under after calibration and make most of the difference between
the two. A third run stopped when one torchrun rank of a held-out TP run aborted (SIGABRT); three
reruns of that shape alone were clean.

Runs of 1 Dec 2026 (load average 1-2) after the runtime's column projections reduce their input
gradient once per sublayer (``planner/runtime/column_group.py``; before, each of q, k, v, gate and up
all-reduced its own): held out 35.6 % and 19.2 % (before calibration 47.1 % and 47.6 % over all runs;
in-sample 16.3 % and 19.6 %). The same three TP plans run by both runtimes, twice each: the grouped
one takes 0.78-1.03x the time of the per-projection one (median 0.83x). The TP runs still come out
38-65 % under after calibration: a profile of one (llama-256, tp 2, 0.25 s a step) spends 37 % waiting
on collectives, 17 % in DTensor's Python dispatch and 27 % in AdamW over DTensor parameters, host work
that a GPU cost model does not have and no single calibration factor separates from the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TARGET = 0.20
"""Held-out mean step-time error the loop must reach (issue 10)."""
WIDTHS = {"llama-128": (128, 4), "llama-256": (256, 3)}
"""Tiny Llamas: name -> (hidden size, layers); 4 heads, 2 KV heads, vocab 2048."""


@dataclass(frozen=True)
class Shape:
    """One run: model, GPUs, parallel degrees, ZeRO, micro-batch, global batch, sequence length."""

    model: str
    gpus: int
    tp: int
    pp: int
    zero: int
    micro_batch: int
    global_batch: int
    seq_len: int

    @property
    def name(self) -> str:
        return f"{self.model}-g{self.gpus}-tp{self.tp}-pp{self.pp}-z{self.zero}-mb{self.micro_batch}-b{self.global_batch}-s{self.seq_len}"


FIT = [
    Shape("llama-128", 1, 1, 1, 0, 4, 4, 64), Shape("llama-128", 2, 1, 1, 0, 2, 4, 128),
    Shape("llama-128", 2, 2, 1, 0, 4, 4, 128), Shape("llama-128", 2, 1, 2, 0, 4, 4, 64),
    Shape("llama-256", 1, 1, 1, 0, 2, 2, 128), Shape("llama-256", 2, 1, 1, 1, 2, 4, 64),
    Shape("llama-256", 2, 2, 1, 0, 2, 2, 256), Shape("llama-256", 2, 1, 2, 0, 4, 4, 64),
]
"""Shapes the calibration sees (one micro-batch per step: ``meshplan run`` measures memory with
torch's MemTracker, which refuses several micro-batches in one step)."""
HELD_OUT = [
    Shape("llama-128", 2, 1, 1, 0, 1, 2, 256), Shape("llama-256", 2, 2, 1, 0, 4, 4, 64),
    Shape("llama-256", 1, 1, 1, 0, 1, 1, 256), Shape("llama-128", 2, 1, 2, 0, 2, 2, 128),
]
"""Shapes it never sees: other batch / sequence / split combinations."""


def write_models(folder: Path) -> dict[str, str]:
    """The tiny Llama config.json files; name -> path."""
    paths = {}
    for name, (hidden, layers) in WIDTHS.items():
        path = folder / name / "config.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({
            "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
            "intermediate_size": hidden * 8 // 3 // 8 * 8, "num_attention_heads": 4, "num_key_value_heads": 2,
            "num_hidden_layers": layers, "vocab_size": 2048, "max_position_embeddings": 1024, "rms_norm_eps": 1e-5,
            "tie_word_embeddings": False,
        }), encoding="utf-8")
        paths[name] = str(path)
    return paths


def _run(cmd: list[str], what: str) -> str:
    """Run a command from the repository root, one thread per process (each process is one CPU
    "GPU", as torchrun sets it); stop the loop with its stderr when it fails."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-1500:]}")
    return done.stdout


def torchrun(ranks: int, args: list[str]) -> list[str]:
    """``torchrun --standalone --nproc-per-node ranks -m cli ARGS``."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks), "-m", "cli", *args]


def profile(folder: Path, ranks: int, quick: bool) -> str:
    """Step 1: the CPU cluster file."""
    out = folder / "cpu_cluster.json"
    _run(torchrun(ranks, ["profile", "--device", "cpu", "-o", str(out), *(["--quick"] if quick else [])]), "meshplan profile")
    return str(out)


def measure(shape: Shape, models: dict[str, str], cluster: str, folder: Path, steps: int, warmup: int) -> str:
    """Step 2 for one shape: its plan, then its run record."""
    plan, record = folder / f"{shape.name}.plan.json", folder / f"{shape.name}.run.json"
    _run([sys.executable, "-m", "cli", "plan", "--model", models[shape.model], "--cluster", cluster, "--gpus", str(shape.gpus),
          "--global-batch", str(shape.global_batch), "--seq-len", str(shape.seq_len), "--tp", str(shape.tp), "--pp", str(shape.pp),
          "--zero", str(shape.zero), "--micro-batch", str(shape.micro_batch), "--recompute", "none", "-o", str(plan)], f"plan {shape.name}")
    _run([sys.executable, "-m", "cli", "run", str(plan), "--model", models[shape.model], "--device", "cpu", "--steps", str(steps),
          "--warmup", str(warmup), "--nproc-per-node", str(shape.gpus), "-o", str(record)], f"run {shape.name}")
    return str(record)


@dataclass(frozen=True)
class LoopResult:
    """Errors (predicted / measured - 1) of every run, and the calibration's own summary."""

    fit: list[tuple[str, float, float, float, float | None]]
    """(record, measured s, before, after, leave-one-shape-out) of each fit run."""
    held_out: list[tuple[str, float, float, float]]
    """(record, measured s, before, after) of each held-out run."""
    factors: dict[str, float]


def calibrate_and_hold_out(cluster: str, fit: list[str], held: list[str], folder: Path, params: list[str] | None) -> LoopResult:
    """Step 3: fit on ``fit``, predict ``held`` with the calibrated cluster."""
    from planner.calibration import load_observations, predict
    from profiles import load_cluster

    calibrated = folder / "calibrated.json"
    block = json.loads(_run([sys.executable, "-m", "cli", "calibrate", *fit, "--cluster", cluster, "-o", str(calibrated), "--json",
                             *(["--params", ",".join(params)] if params else [])], "meshplan calibrate"))
    before, after = load_cluster(cluster), load_cluster(calibrated)
    fit_rows = [(r["label"], r["step_time_s"], r["before_s"] / r["step_time_s"] - 1, r["after_s"] / r["step_time_s"] - 1,
                 None if r["held_out_s"] is None else r["held_out_s"] / r["step_time_s"] - 1) for r in block["runs"]]
    held_rows = []
    for obs in load_observations(held, before):
        held_rows.append((obs.label, obs.step_time_s, predict(obs, before)[0] / obs.step_time_s - 1, predict(obs, after)[0] / obs.step_time_s - 1))
    return LoopResult(fit_rows, held_rows, {k: v["value"] for k, v in block["factors"].items()})


def run_loop(folder: Path, ranks: int, fit: list[Shape], held: list[Shape], steps: int, warmup: int, quick: bool,
             params: list[str] | None = None) -> LoopResult:
    """The whole loop in ``folder``."""
    models = write_models(folder)
    cluster = profile(folder, ranks, quick)
    fit_records = [measure(s, models, cluster, folder, steps, warmup) for s in fit]
    held_records = [measure(s, models, cluster, folder, steps, warmup) for s in held]
    return calibrate_and_hold_out(cluster, fit_records, held_records, folder, params)


def summary(errors: list[float | None]) -> tuple[float, float]:
    """(mean |error|, max |error|) of the errors present."""
    values = [abs(e) for e in errors if e is not None]
    return sum(values) / len(values), max(values)


def report(result: LoopResult) -> str:
    """The table and the summary lines."""
    lines = [f"{'run':<58} {'measured s':>10} {'before':>8} {'after':>8} {'LOSO':>8}"]
    for label, step, before, after, loso in result.fit:
        lines.append(f"fit  {Path(label).name[:-9]:<53} {step:>10.4f} {before:>+8.1%} {after:>+8.1%} {'-' if loso is None else f'{loso:+.1%}':>8}")
    for label, step, before, after in result.held_out:
        lines.append(f"held {Path(label).name[:-9]:<53} {step:>10.4f} {before:>+8.1%} {after:>+8.1%} {'':>8}")
    lines.append("factors: " + ", ".join(f"{k} {v:.4g}" for k, v in result.factors.items()))
    rows = [("before (profiled cluster, all runs)", [r[2] for r in result.fit] + [r[2] for r in result.held_out]),
            ("after, fit runs (in-sample)", [r[3] for r in result.fit]),
            ("leave-one-shape-out, fit runs", [r[4] for r in result.fit]),
            ("after, held-out runs", [r[3] for r in result.held_out])]
    for label, errors in rows:
        mean, worst = summary(errors)
        lines.append(f"{label:<38} mean |error| {mean:6.1%}   max {worst:6.1%}")
    held_mean = summary([r[3] for r in result.held_out])[0]
    lines.append(f"held-out mean error {held_mean:.1%} against the {TARGET:.0%} target: {'met' if held_mean < TARGET else 'NOT met'}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2, help="gloo processes for the profile (runs use 1-2)")
    parser.add_argument("--out", help="folder for the cluster, plans and records (default: a temporary one)")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="profile with --quick")
    parser.add_argument("--params", help="factors to fit, comma-separated (meshplan calibrate --params; default: its defaults)")
    args = parser.parse_args(argv[1:])
    folder = Path(args.out or tempfile.mkdtemp(prefix="calibration_loop_"))
    folder.mkdir(parents=True, exist_ok=True)
    params = args.params.split(",") if args.params else None
    result = run_loop(folder, args.ranks, FIT, HELD_OUT, args.steps, args.warmup, args.quick, params)
    print(report(result))
    print(f"files in {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
