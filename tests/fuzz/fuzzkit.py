"""Helpers of the fuzz suite (importable as ``fuzzkit``: tests/fuzz/conftest.py puts this folder on
sys.path): the in-process command line, the refusal contract, a valid plan.

The command line runs in-process through ``planner.cli.main`` (a subprocess per example would be
far too slow for hundreds of examples); stdout and stderr are captured with ``contextlib``. Every
refusal must come within :data:`CASE_LIMIT_S` (a hang, say a reader waiting on a FIFO, is cut off
by ``SIGALRM`` and fails the case). With ``MESHPLAN_FUZZ_LOG`` set, each case's command is appended
to that file (``bench/fuzz_counts.py`` counts them per command).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from planner.cli import main

FUZZ = settings(database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
"""Settings of every fuzz test (with its own ``max_examples``): no example database left in the
tree, no per-example deadline (engine-free but file-writing examples vary in time)."""


CASE_LIMIT_S = float(os.environ.get("MESHPLAN_FUZZ_LIMIT_S", "15"))
"""Most seconds one refusal may take in the suite: it cuts off a hang (a reader waiting on a FIFO) or
quadratic parsing, with room for a loaded 2-core machine (a 5 s bound flaked at load 10). The
issue's 5 s bound on each reproduction, whole process, is what ``bench/hardening_repros.py`` measures."""


class CaseTimeout(BaseException):
    """Raised by ``SIGALRM`` in a case that ran past its limit (the CLI turns it into exit 1)."""


def _alarm(signum: int, frame: object) -> None:
    raise CaseTimeout(f"the case ran past {CASE_LIMIT_S:g} s")


def log_case(command: str) -> None:
    """Append ``command`` to the ``MESHPLAN_FUZZ_LOG`` file, when set (one line per case)."""
    path = os.environ.get("MESHPLAN_FUZZ_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(command + "\n")


def run_cli(*argv: str, limit_s: float | None = None) -> tuple[int, str, str]:
    """``meshplan ARGV`` in-process: (exit code, stdout, stderr); with ``limit_s``, cut off by
    ``SIGALRM`` after that long and failed when it took longer."""
    log_case(argv[0] if argv else "")
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm) if limit_s else None
    start = time.perf_counter()
    try:
        if limit_s:
            signal.setitimer(signal.ITIMER_REAL, limit_s)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        if limit_s:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    elapsed = time.perf_counter() - start
    assert not limit_s or elapsed < limit_s, f"{argv!r:.300} took {elapsed:.1f} s (limit {limit_s:g} s): {err.getvalue()[:300]}"
    return code, out.getvalue(), err.getvalue()


def assert_refused(*argv: str, limit_s: float = CASE_LIMIT_S) -> str:
    """The bad-input contract: exit 2 within ``limit_s`` (:data:`CASE_LIMIT_S`; more for cases that
    run a model factory, which is user code), nothing on stdout, one ``meshplan: error:`` line, no
    traceback."""
    code, out, err = run_cli(*argv, limit_s=limit_s)
    assert code == 2, f"exit {code} for {argv!r:.300}: {err[:500]}"
    assert out == "", f"stdout for {argv!r:.300}: {out[:200]}"
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("meshplan: error: "), f"{argv!r:.300}: {err[:500]}"
    assert "Traceback" not in err
    return lines[0]


def valid_plan_dict() -> dict[str, Any]:
    """A plan meshplan validates (llama3.1-8b on 16 H100s for Megatron-LM: tp 2 x pp 2 x dp 4, full
    recomputation), the plan of exactly that configuration (``planner.plans.given.config_plan``)."""
    from planner.plans.given import config_plan

    plan = config_plan(model="llama3.1-8b", cluster="dgx-h100", gpus=16, global_batch=64, seq_len=4096, tp=2, pp=2,
                       recompute="full", zero=1, target="megatron")
    return json.loads(plan.to_json())


def refused_everywhere(plan_path: str) -> None:
    """Every command that reads a plan refuses it with the one-line contract, and ``-o`` leaves no file."""
    out = Path(plan_path).with_name("out.txt")
    assert_refused("validate", plan_path)
    assert_refused("estimate", "--plan", plan_path, "--json")
    assert_refused("report", plan_path, "-o", str(out.with_suffix(".md")))
    for target in ("megatron", "torchtitan", "deepspeed"):
        assert_refused("export", plan_path, "--to", target, "-o", str(out))
    assert not out.exists() and not out.with_suffix(".md").exists(), "a refused plan left an output file"
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == [], "a temporary file was left behind"
