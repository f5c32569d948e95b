"""Issue 26's reproductions, each run as a user runs it (``python cli.py ...`` in a fresh process):
prints its exit code, wall and CPU seconds, whether it left an output file or ran a planted factory,
and the first line on stderr. Every row should read exit 2 (130 for Ctrl-C). Start-up (Python,
and torch for run / profile / --trace) is included: on a loaded machine the wall time exceeds the
CPU time. Usage: ``python bench/hardening_repros.py``.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
from conftest import CPU_CLUSTER, TINY_LLAMA  # noqa: E402

SMALL = ["--cluster", "cpu.json", "--gpus", "1", "--global-batch", "4", "--seq-len", "32"]
SWEEP = ["sweep", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq-len", "4096", "--time-limit", "5"]


def fixtures(d: Path) -> None:
    """Files of the reproductions in ``d``."""
    (d / "tiny").mkdir()
    (d / "tiny" / "config.json").write_text(json.dumps(TINY_LLAMA))
    (d / "cpu.json").write_text(json.dumps(CPU_CLUSTER))
    cli("plan", "--model", "tiny/config.json", *SMALL[:-6], "--gpus", "2", "--global-batch", "8", "--seq-len", "32",
        "--target", "megatron", "-o", "plan.json", cwd=d)
    plan = json.loads((d / "plan.json").read_text())
    for field, value in (("model", "llama\ntouch PWNED\n#"), ("cluster", "dgx\ntouch PWNED\n#")):
        edited = json.loads(json.dumps(plan))
        edited[field]["name"] = value
        (d / f"hostile_{field}.json").write_text(json.dumps(edited))
    record = json.loads((ROOT / "tests" / "fuzz" / "data" / "run_record.json").read_text())
    (d / "x.py").write_text("open('PWNED', 'w').write('ran')\ndef make():\n    raise SystemExit(0)\n")
    for name, change in (("rec_factory", {"arg": "x.py:make"}), ("rec_zero", {"step": 0.0}), ("rec_neg", {"step": -1.0})):
        r = json.loads(json.dumps(record))
        r["model"]["arg"] = r["plan"]["model_arg"] = change.get("arg", "tiny/config.json")
        r["step_time"]["median_s"] = change.get("step", r["step_time"]["median_s"])
        (d / f"{name}.json").write_text(json.dumps(r))
    head = "model,gpus,global_batch,seq_len,step_time_s,peak_memory_gib\n"
    for name, row in (("factory", "x.py:make,1,4,32,0.5,"), ("mem_nan", "tiny/config.json,1,4,32,0.5,nan"),
                      ("step_nan", "tiny/config.json,1,4,32,nan,"), ("step_inf", "tiny/config.json,1,4,32,inf,")):
        (d / f"runs_{name}.csv").write_text(head + row + "\n")
    os.mkfifo(d / "fifo.json")
    os.mkfifo(d / "fifo.csv")
    os.symlink("/dev/zero", d / "zero.json")
    os.symlink("/dev/zero", d / "zero.csv")
    (d / "quad.json").write_bytes(b'{"schema_version": "' + b'\\"' * (64 * 2**10))
    for name, patch in (("nanh", '"hidden_size": NaN'), ("zeroheads", '"num_attention_heads": 0'), ("nolayers", '"num_hidden_layers": 0')):
        (d / name).mkdir()
        key = patch.split(":")[0].strip('"')
        (d / name / "config.json").write_text(json.dumps(TINY_LLAMA).replace(f'"{key}": {TINY_LLAMA[key]}', patch))
    (d / "big").mkdir()
    (d / "big" / "config.json").write_text(json.dumps({**TINY_LLAMA, "pad": "x" * (17 * 2**20)}))
    bad = d / "caf\udce9".encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps(TINY_LLAMA))
    os.symlink(d / "elsewhere.json", d / "link.json")


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python cli.py ARGV`` in ``cwd``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def cases() -> list[tuple[str, list[str]]]:
    """(label, argv) of every reproduction."""
    out: list[tuple[str, list[str]]] = []
    for f in ("hostile_model.json", "hostile_cluster.json"):
        out += [(f"validate {f}", ["validate", f]), (f"export megatron {f}", ["export", f, "--to", "megatron", "-o", "launch.sh"]),
                (f"export torchtitan {f}", ["export", f, "--to", "torchtitan", "-o", "meshplan_job.py"])]
    out += [("calibrate record naming a factory", ["calibrate", "rec_factory.json", "--cluster", "cpu.json", "-o", "c.json"]),
            ("calibrate CSV naming a factory", ["calibrate", "runs_factory.csv", "--cluster", "cpu.json", "-o", "c.json"])]
    for f in ("fifo.json", "zero.json"):
        out += [(f"{cmd[0]} {' '.join(cmd[1:-1])} {f}".replace("  ", " "), [*cmd[:-1], f] + (["-o", "out.md"] if cmd[0] in ("report", "export") else []))
                for cmd in (["validate", "F"], ["estimate", "--plan", "F"], ["report", "F"], ["export", "--to=megatron", "F"],
                            ["check-memory", "F"], ["run", "F"])]
        out += [(f"estimate --model {f}", ["estimate", "--model", f, *SMALL]), (f"plan --trace --model {f}", ["plan", "--trace", "--model", f, *SMALL]),
                (f"calibrate {f}", ["calibrate", f, "--cluster", "cpu.json", "-o", "c.json"])]
    out += [(f"calibrate {f}", ["calibrate", f, "--cluster", "cpu.json", "-o", "c.json"]) for f in ("fifo.csv", "zero.csv")]
    out += [("validate quadratic 64 KiB", ["validate", "quad.json"]), ("plan --trace 17 MiB config", ["plan", "--trace", "--model", "big/config.json", *SMALL])]
    for label, extra in (("--gpus 2097152", ["--gpus", "2097152", "--global-batch", "512"]), ("--global-batch 2^50", ["--gpus", "64", "--global-batch", str(2**50)]),
                         ("--gpus 2^40", ["--gpus", str(2**40), "--global-batch", "512"]), ("--gpus 8..1e17", ["--gpus", "8..99999999999999999", "--global-batch", "512"]),
                         ("--critical-batch 2^80", ["--gpus", "64", "--global-batch", "auto", "--critical-batch", str(2**80)]),
                         ("--tokens 1e999", ["--gpus", "64", "--global-batch", "512", "--tokens", "1e999"])):
        out.append((f"sweep {label}", SWEEP + extra))
    out += [("estimate -o symlink", ["estimate", "--model", "tiny/config.json", *SMALL, "-o", "link.json"]),
            ("estimate -o /dev/null", ["estimate", "--model", "tiny/config.json", *SMALL, "-o", "/dev/null"])]
    out += [(f"calibrate {f}", ["calibrate", f, "--cluster", "cpu.json", "-o", "c.json"]) for f in ("runs_mem_nan.csv", "runs_step_nan.csv", "runs_step_inf.csv", "rec_zero.json", "rec_neg.json")]
    out += [("run --device cuda", ["run", "plan.json", "--device", "cuda"]), ("run --seed 118059162071", ["run", "plan.json", "--seed", "118059162071"]),
            ("profile --hidden 4000000", ["profile", "--device", "cpu", "--hidden", "4000000", "-o", "p.json"]),
            ("profile --seq-lens 1e8", ["profile", "--device", "cpu", "--seq-lens", "100000000", "-o", "p.json"]),
            ("profile --sizes ''", ["profile", "--device", "cpu", "--sizes", "", "-o", "p.json"])]
    out += [(f"plan --trace {m}", ["plan", "--trace", "--model", f"{m}/config.json", *SMALL]) for m in ("nanh", "zeroheads", "nolayers")]
    bad = "caf\udce9".encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
    out += [(f"{c} -o, non-UTF-8 folder", [c, "--model", f"{bad}/config.json", *SMALL, "-o", "p.json"]) for c in ("plan", "estimate")]
    return out


def timed(argv: list[str], cwd: Path) -> tuple[int, float, float, str]:
    """Exit code, wall and CPU seconds (children), first stderr line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = cli(*argv, cwd=cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.returncode, time.perf_counter() - start, cpu, (done.stderr.strip().splitlines() or [""])[0]


def interrupt(cwd: Path, delay: float) -> tuple[int, str]:
    """Ctrl-C ``delay`` seconds after start: exit code and stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "validate", "plan.json"], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err.strip().replace("\n", " | ")[:80]


def main() -> int:
    """Run every reproduction in a fresh folder and print a table."""
    with tempfile.TemporaryDirectory() as folder:
        d = Path(folder)
        fixtures(d)
        made = set(os.listdir(d))
        print(f"{'reproduction':<46} {'exit':>4} {'wall s':>7} {'cpu s':>6}  first line")
        for label, argv in cases():
            code, wall, cpu, line = timed(argv, d)
            left = sorted(set(os.listdir(d)) - made)
            flag = f" LEFT {left}" if left else ""
            print(f"{label[:46]:<46} {code:>4} {wall:>7.1f} {cpu:>6.1f}  {line[:110]}{flag}")
            for name in left:
                (d / name).unlink()
        for delay in (0.3, 0.6):
            code, err = interrupt(d, delay)
            print(f"{f'Ctrl-C at {delay} s':<46} {code:>4} {'':>7} {'':>6}  {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
