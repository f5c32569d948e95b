"""GPU truth: ``meshplan run`` against a plain bf16 training step of the same shape and against its plan.

For each configuration (the shared H200 ones of 2026-12-04, ``bench/gpu_truth_cfg/``, plus this
bench's own compiled and longer-sequence rows) on one device:

1. the prediction: ``meshplan estimate ... -o plan.json`` with the cluster preset (``--cluster``) and
   with a profiled cluster file (``--profiled``; the H200 profile of 2026-12-04 by default);
2. ``meshplan run plan.json --device D --json``: step time, peak memory, dtypes, start-up seconds, and
   whether anything but meshplan's own lines reached stderr;
3. a reference step written as a user writes one with Hugging Face transformers (this file's
   ``--reference-step`` mode, in its own process): ``LlamaForCausalLM`` built on the device with fp32
   weights, forward under ``torch.autocast(bfloat16)``, SDPA attention, gradient accumulation over
   the micro-batches, ``AdamW(fused=True)`` on CUDA, non-reentrant gradient checkpointing for
   ``full`` (transformers has no selective recomputation: ``selective`` rows run without any); never
   compiled, so a compiled row's run / reference is the issue's "compiled run against the plain bf16 step".

It writes ``bench/results/gpu_truth_<device>.json`` and prints the table: run / reference,
predicted / run, memory allocated / predicted.

Rehearsal on CPU: ``python bench/gpu_truth.py --device cpu --tiny`` (tiny Llama shapes, about a
minute). On a GPU machine, in one call, from the repository root::

    python bench/gpu_truth.py --device cuda            # every row, about 8 minutes on an H200 (--budget 540)

The GPU machine needs torch with CUDA and transformers; meshplan's planning side also imports
pydantic, PuLP and HiGHS (``highspy``): where they are missing, carry their wheels and install them
into a folder on ``PYTHONPATH`` first, e.g. ``pip install --no-index --no-deps --target SITE
whl/*.whl`` and ``PYTHONPATH=SITE:. python bench/gpu_truth.py ...`` (as the 2026-12-04 run did).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "bench" / "gpu_truth_cfg"
CLI = ROOT / "cli.py"
TRUTH = CFG / "h200_truth_2026-12-04.json"
"""The figures of the 2026-12-04 H200 run (meshplan GPU truth run, one H200), for comparison."""
PROFILED = CFG / "h200_profiled_2026-12-04.json"
"""``meshplan profile --device cuda --quick`` on that H200: the default profiled cluster file."""


@dataclass(frozen=True)
class Config:
    """One row: model (config.json path or preset), sequence, global batch, micro-batch, recompute, compile."""

    name: str
    model: str
    seq: int
    global_batch: int
    micro_batch: int
    recompute: str
    compile: bool = False
    shared: bool = True
    """One of the shared 2026-12-04 configurations (else this bench's own)."""


def configs(tiny: bool, folder: Path) -> list[Config]:
    """The rows: shared and own at full size, or the same rows on tiny Llama shapes (``tiny``)."""
    l1b, l3b = str(CFG / "llama3.2-1b.json"), str(CFG / "llama3.2-3b.json")
    rows = [
        Config("l1b-s2k-mb4-none", l1b, 2048, 4, 4, "none"),
        Config("l3b-s2k-mb2-none", l3b, 2048, 2, 2, "none"),
        Config("l1b-s2k-mb2x2-sel", l1b, 2048, 4, 2, "selective"),
        Config("l1b-s8k-mb1-full", l1b, 8192, 1, 1, "full"),
        Config("l3b-s4k-mb1x2-sel", l3b, 4096, 2, 1, "selective"),
        Config("l8b-s2k-mb1-full", "llama3.1-8b", 2048, 1, 1, "full"),
        Config("l1b-s2k-mb4-none-compile", l1b, 2048, 4, 4, "none", compile=True, shared=False),
        Config("l3b-s2k-mb2-none-compile", l3b, 2048, 2, 2, "none", compile=True, shared=False),
        Config("l1b-s4k-mb2-none", l1b, 4096, 2, 2, "none", shared=False),
    ]
    if not tiny:
        return rows
    small = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256,
             "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "tie_word_embeddings": True}
    path = folder / "tiny-llama.json"
    path.write_text(json.dumps(small))
    keep = ("l1b-s2k-mb4-none", "l1b-s2k-mb2x2-sel", "l1b-s8k-mb1-full", "l1b-s2k-mb4-none-compile")
    return [Config(r.name, str(path), max(16, r.seq // 64), r.global_batch, r.micro_batch, r.recompute, r.compile, r.shared)
            for r in rows if r.name in keep]


def _cli(args: list[str], timeout: float) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    try:
        done = subprocess.run([sys.executable, str(CLI), *args], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:.0f} s"
    return done.returncode, done.stdout, done.stderr


def predict(c: Config, cluster: str, folder: Path) -> dict:
    """``meshplan estimate -o``: the plan file and its step time and peak memory (``error`` on failure)."""
    plan = folder / f"{c.name}.{Path(cluster).stem}.plan.json"
    args = ["estimate", "--model", c.model, "--cluster", cluster, "--gpus", "1", "--global-batch", str(c.global_batch),
            "--seq-len", str(c.seq), "--micro-batch", str(c.micro_batch), "--recompute", c.recompute,
            "--compile" if c.compile else "--no-compile", "-o", str(plan), "--json"]
    rc, out, err = _cli(args, 300)
    if rc != 0:
        return {"error": err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"}
    est = json.loads(out)
    return {"plan": str(plan), "step_s": est["step_time_s"], "memory_gib": est["peak_memory_gib"], "fits": est["fits"]}


def run(plan: str, c: Config, device: str, steps: int, warmup: int, timeout: float) -> dict:
    """``meshplan run``: the record's figures; ``outcome`` names a failure (exit code and last line)."""
    rc, out, err = _cli(["run", plan, "--model", c.model, "--device", device, "--steps", str(steps), "--warmup", str(warmup),
                         "--json"], timeout)
    foreign = [line for line in err.splitlines() if line.strip() and not line.startswith("meshplan:")]
    if rc != 0:
        last = err.strip().splitlines()[-1] if err.strip() else ""
        return {"outcome": f"exit {rc}: {last[:300]}", "stderr_foreign_lines": len(foreign)}
    rec = json.loads(out)
    training = rec.get("training") or {}
    return {"outcome": "ok", "step_s": rec["step_time"]["median_s"], "first_step_s": rec["step_time"]["all_steps_s"][0],
            "alloc_gib": max(m["peak_allocated_gib"] for m in rec["memory"]),
            "reserved_gib": max((m["peak_reserved_gib"] or 0.0) for m in rec["memory"]),
            "compute_dtype": training.get("compute_dtype"), "master_dtype": training.get("master_dtype"),
            "attention": training.get("attention"), "compiled_blocks": training.get("compiled_blocks"),
            "startup_s": training.get("startup_s"), "losses": rec["losses"], "stderr_foreign_lines": len(foreign),
            "stderr_sample": foreign[:3]}


def reference(c: Config, device: str, steps: int, warmup: int, timeout: float) -> dict:
    """The Hugging Face bf16 step of ``c`` in its own process (:func:`reference_step`)."""
    if not c.model.endswith(".json"):
        return {"outcome": "no config.json (a preset row): no reference"}
    args = [sys.executable, __file__, "--reference-step", c.model, str(c.seq), str(c.global_batch), str(c.micro_batch),
            c.recompute, device, str(steps), str(warmup)]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"outcome": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0:
        return {"outcome": f"exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1][:300]}"}
    return {"outcome": "ok", **json.loads(done.stdout)}


def reference_step(cfg_path: str, seq: int, gb: int, mb: int, recompute: str, device: str, steps: int, warmup: int) -> dict:
    """Train ``steps`` steps of a Hugging Face Llama as a user writes it (module docstring); its median step."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    fields = {k: v for k, v in json.loads(Path(cfg_path).read_text()).items() if k not in ("architectures", "model_type")}
    config = LlamaConfig(**fields, attn_implementation="sdpa")
    cuda = device == "cuda"
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config)
    if recompute == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda or None)
    rounds = gb // mb
    data = torch.randint(0, config.vocab_size, (steps, rounds, mb, seq), device=device)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    seconds = []
    for step in range(steps):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for tokens in data[step]:
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = model(input_ids=tokens, labels=tokens).loss
            (loss / rounds).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return {"step_s": statistics.median(seconds[warmup:] or seconds), "steps_s": seconds,
            "alloc_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
            "recompute": recompute if recompute != "selective" else "none (transformers has no selective recomputation)"}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def measure(c: Config, args: argparse.Namespace, folder: Path) -> dict:
    """One row: predictions, the run and the reference, with the ratios of the table."""
    row: dict = {**asdict(c), "model": os.path.relpath(c.model, ROOT) if c.model.endswith(".json") else c.model}
    row["predicted_preset"] = predict(c, args.cluster, folder)
    row["predicted_profiled"] = predict(c, args.profiled, folder)
    plan = row["predicted_preset"].get("plan")
    row["run"] = run(plan, c, args.device, args.steps, args.warmup, args.timeout) if plan else {"outcome": "no plan"}
    row["reference"] = reference(c, args.device, args.steps, args.warmup, args.timeout)
    ran, ref, pred = row["run"].get("step_s"), row["reference"].get("step_s"), row["predicted_preset"].get("step_s")
    row["run_over_reference"] = _ratio(ran, ref)
    row["predicted_over_run"] = _ratio(pred, ran)
    row["profiled_over_run"] = _ratio(row["predicted_profiled"].get("step_s"), ran)
    row["alloc_over_predicted"] = _ratio(row["run"].get("alloc_gib"), row["predicted_preset"].get("memory_gib"))
    for key in ("predicted_preset", "predicted_profiled"):
        row[key].pop("plan", None)
    return row


def _fmt(x: float | None, spec: str) -> str:
    return format(x, spec) if x is not None else "-"


def table(rows: list[dict]) -> str:
    """The printed table: one line per configuration."""
    head = (f"{'config':<26}{'pred s':>8}{'prof s':>8}{'run s':>9}{'ref s':>9}{'run/ref':>9}{'pred/run':>9}"
            f"{'alloc/pred':>11}{'start s':>9}  dtype / outcome")
    lines = [head]
    for r in rows:
        run_, ref = r["run"], r["reference"]
        what = run_.get("compute_dtype") or run_.get("outcome", "")
        lines.append(f"{r['name']:<26}{_fmt(r['predicted_preset'].get('step_s'), '8.3f')}"
                     f"{_fmt(r['predicted_profiled'].get('step_s'), '8.3f')}{_fmt(run_.get('step_s'), '9.3f')}"
                     f"{_fmt(ref.get('step_s'), '9.3f')}{_fmt(r['run_over_reference'], '9.2f')}"
                     f"{_fmt(r['predicted_over_run'], '9.2f')}{_fmt(r['alloc_over_predicted'], '11.2f')}"
                     f"{_fmt(run_.get('startup_s'), '9.1f')}  {what}")
    return "\n".join(lines)


def environment(device: str) -> dict:
    """Date, versions, device name and meshplan's commit."""
    import torch
    import transformers

    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"date": date.today().isoformat(), "device": name, "torch": torch.__version__, "cuda": torch.version.cuda,
            "transformers": transformers.__version__, "meshplan_commit": commit or None}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--reference-step"]:
        a = argv[1:]
        out = reference_step(a[0], int(a[1]), int(a[2]), int(a[3]), a[4], a[5], int(a[6]), int(a[7]))
        print(json.dumps(out))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny Llama shapes (the CPU rehearsal)")
    parser.add_argument("--cluster", default="dgx-h200", help="cluster preset of the prediction (default dgx-h200)")
    parser.add_argument("--profiled", default=str(PROFILED), help="profiled cluster file (default: the H200 of 2026-12-04)")
    parser.add_argument("--only", help="comma-separated configuration names")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run and per reference (default 120)")
    parser.add_argument("--budget", type=float, default=540.0,
                        help="seconds for the whole bench: rows not started by then are skipped (default 540)")
    parser.add_argument("-o", "--output", help="default: bench/results/gpu_truth_<device>.json")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="meshplan-gpu-truth-"))
    rows = configs(args.tiny, folder)
    if args.only:
        rows = [r for r in rows if r.name in args.only.split(",")]
    env = environment(args.device)
    measured, began = [], time.perf_counter()
    for c in rows:
        start = time.perf_counter()
        if start - began > args.budget:
            print(f"{c.name}: skipped (over --budget {args.budget:.0f} s)", file=sys.stderr, flush=True)
            continue
        measured.append(measure(c, args, folder))
        print(f"{c.name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    slug = "cpu-tiny" if args.tiny else "".join(ch if ch.isalnum() else "-" for ch in env["device"].lower()).strip("-")
    out = Path(args.output or ROOT / "bench" / "results" / f"gpu_truth_{slug}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {**env, "tiny": args.tiny, "cluster": args.cluster, "profiled": os.path.relpath(args.profiled, ROOT),
              "steps": args.steps, "warmup": args.warmup, "rows": measured,
              "truth_2026_12_04": json.loads(TRUTH.read_text()) if not args.tiny else None}
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(measured))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
