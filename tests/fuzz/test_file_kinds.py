"""Every reader against every kind of file that is not what it claims: a named pipe (FIFO), a symbolic
link to ``/dev/zero``, a directory, an empty file, a truncated file, a sparse file past the 16 MiB
cap, 16 MiB of an unterminated string of escaped quotes (quadratic for a backtracking pattern) and
bytes that are not UTF-8. Each is refused with one line within the per-case limit, as a plan
(validate, estimate --plan, report, export, check-memory, run), a model config (estimate, plan
--trace, sweep), a cluster file, a run record and a runs CSV (calibrate); no output file is left.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fuzzkit import assert_refused

KINDS = ("fifo", "dev-zero", "directory", "empty", "truncated", "huge", "quadratic", "not-utf8")
SMALL = ["--gpus", "1", "--global-batch", "4", "--seq-len", "32"]


def make(kind: str, folder: Path, name: str, good: str) -> str:
    """A file of ``kind`` at ``folder / name``; ``good`` is a valid text of its type (for truncation)."""
    path = folder / name
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        path.write_text(good[: len(good) // 2], encoding="utf-8")
    elif kind == "huge":
        with open(path, "wb") as handle:
            handle.truncate(17 * 2**20)
    elif kind == "quadratic":
        path.write_bytes(b'{"schema_version": "' + b'\\"' * (8 * 2**20 - 16))
    else:
        path.write_bytes(b'{"name": "caf\xe9"}')
    return str(path)


def readers(f: str, tiny: Path, out: str) -> dict[str, list[list[str]]]:
    """Commands reading ``f``, by what they read it as (argv lists)."""
    cpu = str(tiny / "cpu.json")
    as_plan = [["validate", f], ["estimate", "--plan", f], ["report", f, "-o", out],
               *[["export", f, "--to", t, "-o", out] for t in ("megatron", "torchtitan", "deepspeed")],
               ["check-memory", f], ["run", f, "-o", out]]
    as_config = [["estimate", "--model", f, "--cluster", cpu, *SMALL, "-o", out], ["plan", "--model", f, "--cluster", cpu, *SMALL, "--trace"],
                 ["sweep", "--model", f, "--cluster", cpu, "--gpus", "1", "--global-batch", "4", "--seq-len", "32", "-o", out]]
    return {"plan": as_plan, "config": as_config,
            "cluster": [["estimate", "--model", "llama3.1-8b", "--cluster", f, "--gpus", "8", "--global-batch", "8", "--seq-len", "128"]],
            "record": [["calibrate", f, "--cluster", cpu, "-o", out]], "csv": [["calibrate", f, "--cluster", cpu, "-o", out]]}


NAMES = {"plan": "plan.json", "config": "config.json", "cluster": "cluster.json", "record": "record.json", "csv": "runs.csv"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("role", list(NAMES))
def test_every_reader_refuses_every_file_kind(tmp_path: Path, tiny_dir: Path, good_plan: dict, kind: str, role: str) -> None:
    good = json.dumps(good_plan) if role == "plan" else (tiny_dir / "record.json").read_text(encoding="utf-8")
    if role == "csv":
        good = "model,gpus,global_batch,seq_len,step_time_s\nllama3.1-8b,8,8,128,0.5\n"
    f = make(kind, tmp_path, NAMES[role], good)
    out = str(tmp_path / "out.txt")
    for argv in readers(f, tiny_dir, out)[role]:
        line = assert_refused(*argv)
        assert len(line) < 600, line
    assert not Path(out).exists(), "a refused input left an output file"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], "a temporary file was left behind"


def test_the_nesting_check_is_linear() -> None:
    """1 MiB of escaped quotes (over an hour for the old backtracking pattern, which took 60 s at
    128 KB), or of balanced brackets, is measured well within 3 s even on a loaded machine."""
    import time

    from planner.intake.jsonio import nesting_depth

    for text, depth in (('{"a": "' + '\\"' * 2**19, 1), ("[]" * 2**19, 1), ('["\\\\", [' + '"x",' * 2**18 + "]]", 2)):
        start = time.perf_counter()
        assert nesting_depth(text) == depth
        assert time.perf_counter() - start < 3.0
