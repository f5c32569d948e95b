"""Whole-process wall time of a 48-point ``meshplan sweep``, and every point against a single ``meshplan plan``.

Usage: python bench/sweep_speed.py [--workers N] [--no-check] [--gpus 64,128,...]
The sweep of issue 14's acceptance: Llama 3.1 70B on three cluster presets (DGX A100, DGX H100,
DGX H200), eight GPU counts from 64 to 4,096, two global batches (512 and 1,024 sequences of 8,192
tokens) = 48 points, run as a user runs it (``python cli.py sweep ... --workers N -o sweep.json``:
start-up, searches, validation and writing included). Target: under 60 s on a 2-core machine. The CPU
time of the sweep and its workers is printed too: on a shared machine it says more than the wall time.
Then each point is planned alone (``python cli.py plan ... --json``, two at a time) and the two step
times are printed side by side; the sweep must equal every single plan. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL, CLUSTERS, SEQ = "llama3.1-70b", ("dgx-a100", "dgx-h100", "dgx-h200"), 8192
GPUS = (64, 128, 256, 512, 1024, 2048, 3072, 4096)
BATCHES = (512, 1024)
TARGET_S = 60.0


def run_sweep(out: Path, workers: int, gpus: tuple[int, ...]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall seconds, CPU seconds of the sweep and its workers, finished process) of the whole sweep."""
    argv = [sys.executable, str(REPO / "cli.py"), "sweep", "--model", MODEL, "--cluster", ",".join(CLUSTERS),
            "--gpus", ",".join(map(str, gpus)), "--global-batch", ",".join(map(str, BATCHES)), "--seq-len", str(SEQ),
            "--tokens", "15T", "--workers", str(workers), "-o", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), proc


def single_plan(point: dict) -> float | None:
    """Step time of ``meshplan plan`` for one point (None when it exits non-zero)."""
    argv = [sys.executable, str(REPO / "cli.py"), "plan", "--model", MODEL, "--cluster", point["cluster"], "--gpus", str(point["gpus"]),
            "--global-batch", str(point["global_batch"]), "--seq-len", str(point["seq_len"]), "--json"]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    return json.loads(proc.stdout)["estimate"]["step_time_s"] if proc.returncode == 0 else None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="sweep processes (default 2: the machine's cores)")
    parser.add_argument("--no-check", action="store_true", help="skip planning every point alone")
    parser.add_argument("--gpus", default=",".join(map(str, GPUS)), help="GPU counts (default: the 8 of the acceptance)")
    args = parser.parse_args(argv[1:])
    gpus = tuple(int(x) for x in args.gpus.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        wall, cpu, proc = run_sweep(Path(tmp) / "sweep.json", args.workers, gpus)
        if proc.returncode != 0:
            print(f"sweep failed (exit {proc.returncode}): {proc.stderr.strip()}")
            return 1
        points = json.loads((Path(tmp) / "sweep.json").read_text())["points"]
    print(f"sweep of {len(points)} points ({MODEL}; {', '.join(CLUSTERS)}; {gpus[0]}-{gpus[-1]} GPUs; batches {BATCHES}), "
          f"{args.workers} workers: {wall:.1f} s whole process, target {TARGET_S:.0f} s, ratio {wall / TARGET_S:.2f} "
          f"({'within' if wall <= TARGET_S else 'over'} the target)", flush=True)
    print(f"CPU time of the sweep and its workers: {cpu:.1f} s (with the cores to itself the sweep could take about "
          f"{cpu / max(1, args.workers):.1f} s on {args.workers} workers, perfectly balanced)", flush=True)
    if args.no_check:
        return 0
    print(f"\n{'cluster':<10} {'GPUs':>5} {'batch':>5}  {'sweep step s':>12}  {'plan step s':>12}  same", flush=True)
    same = 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        for p, single in zip(points, pool.map(single_plan, points)):  # in order, each printed as it is known
            equal = p["step_time_s"] == single
            same += equal
            sweep_s = f"{p['step_time_s']:.6f}" if p["step_time_s"] is not None else "no plan"
            plan_s = f"{single:.6f}" if single is not None else "no plan"
            print(f"{p['cluster']:<10} {p['gpus']:>5} {p['global_batch']:>5}  {sweep_s:>12}  {plan_s:>12}  {'yes' if equal else 'NO'}", flush=True)
    print(f"{same} of {len(points)} points equal the single plan's step time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
