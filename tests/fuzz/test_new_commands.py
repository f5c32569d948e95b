"""The commands added after the first hardening round (run, check-memory, profile, calibrate, sweep)
against bad values, and data files that name code: each is exit 2 with one line within the case
limit, and no factory named in a file runs."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzkit import FUZZ, assert_refused

HUGE = st.integers(2**40 + 1, 10**60).map(str)
BAD_INTS = st.one_of(st.integers(-(10**6), 0).map(str), HUGE, st.sampled_from(["nan", "inf", "1e999", "x", "", "8.5", "\udcff"]))
NUMBERS = st.sampled_from(["nan", "inf", "-inf", "1e999", "-1", "0", "x", ""])


@settings(FUZZ, max_examples=25)
@given(flag=st.sampled_from(["--seed", "--steps", "--warmup", "--nproc-per-node", "--device"]),
       value=st.one_of(BAD_INTS, st.just("cuda"), st.just("118059162071")))
def test_run_refuses_bad_values(tiny_dir, flag, value) -> None:
    plan = str(tiny_dir / "record.json")  # any path: the values are refused first, or the file is not a plan
    if flag == "--device" and value not in ("cuda",):
        value = value or "tpu"
    assert_refused("run", plan, flag, value)


@settings(FUZZ, max_examples=20)
@given(flag=st.sampled_from(["--sizes", "--hidden", "--seq-lens"]),
       value=st.one_of(st.sampled_from(["", ",", "0", "-4", "4000000", "100000000", "1TiB", "1..0", "x"]), HUGE))
def test_profile_refuses_bad_sizes(tmp_path_factory, flag, value) -> None:
    out = tmp_path_factory.mktemp("prof") / "c.json"
    assert_refused("profile", "--device", "cpu", flag, value, "-o", str(out))
    assert not out.exists()


@settings(FUZZ, max_examples=10)
@given(flag=st.sampled_from(["--pp-rank", "--model"]), value=st.sampled_from(["-1", "99999999999999999999", "x", "x.py:make", "/dev/zero"]))
def test_check_memory_refuses_bad_values(good_plan_file, flag, value) -> None:
    assert_refused("check-memory", str(good_plan_file), flag, value)


SWEEP = {"--model": "llama3.1-8b", "--cluster": "dgx-h100", "--gpus": "64", "--global-batch": "512", "--seq-len": "4096"}


@settings(FUZZ, max_examples=40)
@given(flag=st.sampled_from(["--gpus", "--global-batch", "--seq-len", "--tokens", "--deadline", "--critical-batch", "--price-per-gpu-hour"]),
       value=st.one_of(BAD_INTS, NUMBERS, st.sampled_from(["2097152", "8..99999999999999999", "1099511627776", "1e999", "9" * 400 + "d"])))
def test_sweep_refuses_out_of_bounds_and_non_finite(flag, value) -> None:
    if flag in ("--tokens", "--price-per-gpu-hour") and value.isdigit() and len(value) < 300:
        value = "1e999"  # a large budget or price of digits alone is still a valid one
    args = {**SWEEP, flag: value, "--time-limit": "5"}
    if flag == "--deadline":
        args["--tokens"] = "1T"
    if flag == "--critical-batch":
        args["--global-batch"] = "auto"
    assert_refused("sweep", *[tok for kv in args.items() for tok in kv])


@settings(FUZZ, max_examples=30)
@given(column=st.sampled_from(["step_time_s", "peak_memory_gib", "gpus", "global_batch", "model"]),
       value=st.sampled_from(["nan", "inf", "-inf", "0", "-1", "1e999", "x.py:make", "os:system", "'", "9" * 400]))
def test_calibrate_csv_values(tiny_dir, tmp_path_factory, column, value) -> None:
    row = {"model": "tiny/config.json", "gpus": "1", "global_batch": "4", "seq_len": "32", "step_time_s": "0.4", "peak_memory_gib": "0.1"}
    row[column] = value
    folder = tmp_path_factory.mktemp("csv")
    (folder / "tiny").symlink_to(tiny_dir / "tiny")
    csv = folder / "runs.csv"
    csv.write_text(",".join(row) + "\n" + ",".join(row.values()) + "\n", encoding="utf-8")
    if column in ("peak_memory_gib",) and value == "0":
        return  # a measured 0 GiB is odd but finite: not refused
    assert_refused("calibrate", str(csv), "--cluster", str(tiny_dir / "cpu.json"), "-o", str(folder / "c.json"))
    assert not (folder / "c.json").exists()


def _factory(folder: Path) -> str:
    """A factory file that leaves a marker when imported, and its ``file.py:fn`` spec."""
    path = folder / "evil.py"
    path.write_text(f"open({str(folder / 'RAN')!r}, 'w').write('ran')\ndef make():\n    raise SystemExit(0)\n", encoding="utf-8")
    return f"{path}:make"


@settings(FUZZ, max_examples=8)
@given(field=st.sampled_from(["record", "csv"]), step=st.sampled_from(["0.4", "0", "-1"]))
def test_factories_named_in_calibration_data_never_run(tiny_dir, tmp_path_factory, field, step) -> None:
    folder = tmp_path_factory.mktemp("evil")
    spec = _factory(folder)
    if field == "record":
        record = json.loads((tiny_dir / "record.json").read_text(encoding="utf-8"))
        record["model"]["arg"] = record["plan"]["model_arg"] = spec
        record["step_time"]["median_s"] = float(step)
        path = folder / "rec.json"
        path.write_text(json.dumps(record), encoding="utf-8")
    else:
        path = folder / "runs.csv"
        path.write_text(f"model,gpus,global_batch,seq_len,step_time_s\n{spec},1,4,32,{step}\n", encoding="utf-8")
    assert_refused("calibrate", str(path), "--cluster", str(tiny_dir / "cpu.json"), "-o", str(folder / "c.json"))
    assert not (folder / "RAN").exists(), "calibrate ran a factory named in a data file"


def test_sweep_report_writes_all_or_nothing(tiny_dir, tmp_path) -> None:
    """A directory in the way of a later point's plan file: refused, and nothing is written."""
    from fuzzkit import run_cli

    args = ["sweep", "--model", str(tiny_dir / "tiny" / "config.json"), "--cluster", str(tiny_dir / "cpu.json"), "--gpus", "1,2",
            "--global-batch", "8", "--seq-len", "32", "--time-limit", "5"]
    report = tmp_path / "s.html"
    code, _, err = run_cli(*args, "--report", str(report))
    assert code == 0, err
    plans = sorted((tmp_path / "s_plans").iterdir())
    assert len(plans) == 4
    later = tmp_path / "t_plans" / plans[-1].name.replace("s_plans", "t_plans")
    later.mkdir(parents=True)
    code, out, err = run_cli(*args, "--report", str(tmp_path / "t.html"), limit_s=30)
    assert code == 2 and out == "" and err.splitlines()[-1].startswith("meshplan: error: --report"), err  # after the sweep's status line
    assert not (tmp_path / "t.html").exists() and [p.name for p in (tmp_path / "t_plans").iterdir()] == [later.name]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@settings(FUZZ, max_examples=10)
@given(what=st.one_of(st.sampled_from(["", "model", "MODELS ", "clusters,gpus", "\udcff", "--json"]), st.text(max_size=12)))
def test_list_refuses_unknown_kinds(what) -> None:
    if what in ("models", "gpus", "clusters") or what.startswith("-"):
        what = f"x{what}"
    assert_refused("list", what)
