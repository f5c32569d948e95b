"""Bad command-line values: numbers out of range or of the wrong kind, absurd magnitudes, paths
that are not files, undecodable bytes; every one is exit 2 with one line."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzkit import FUZZ, assert_refused

BAD_COUNTS = st.one_of(
    st.integers(-(10**6), 0).map(str),
    st.integers(2**40 + 1, 10**40).map(str),  # past every bound (gpus: 2^20; batch, sequence: 2^40)
    st.sampled_from(["nan", "inf", "-inf", "1e3", "0x10", "eight", "", " ", "8.5", "1_000_000_000_000_000", "\udcff8"]),
)
FLAGS = ("--gpus", "--global-batch", "--seq-len", "--tp", "--pp", "--cp", "--vpp", "--micro-batch")
BASE = {"--model": "llama3.1-8b", "--cluster": "dgx-h100", "--gpus": "8", "--global-batch": "32", "--seq-len": "4096"}


def _argv(command: str, changes: dict[str, str]) -> list[str]:
    args = {**BASE, **changes}
    return [command] + [tok for kv in args.items() for tok in kv]


@settings(FUZZ, max_examples=60)
@given(flag=st.sampled_from(FLAGS), value=BAD_COUNTS)
def test_estimate_refuses_bad_counts(flag, value) -> None:
    assert_refused(*_argv("estimate", {flag: value}), "--json")


@settings(FUZZ, max_examples=30)
@given(flag=st.sampled_from(FLAGS[:3]), value=BAD_COUNTS)
def test_plan_refuses_bad_counts(flag, value) -> None:
    assert_refused(*_argv("plan", {flag: value}), "--json")


@settings(FUZZ, max_examples=30)
@given(limit=st.sampled_from(["0", "-1", "nan", "inf", "1e400", "abc", "1e9"]), headroom=st.sampled_from(["-1", "nan", "inf", "x", "1e300"]))
def test_plan_refuses_bad_time_limit_and_headroom(limit, headroom) -> None:
    assert_refused(*_argv("plan", {}), "--time-limit", limit, "--memory-headroom", headroom)


@settings(FUZZ, max_examples=40)
@given(kind=st.sampled_from(["--model", "--cluster"]),
       value=st.one_of(st.sampled_from(["/dev/zero", "/dev/null", "/", "/nonexistent/x.json", "no-such-preset", "x.py:f", ":", "a:b:c",
                                        "/etc/passwd", "\udcff\udcfe.json", "\udcffmodel", "os:system", "..", ""]),
                       st.text(min_size=1, max_size=40).filter(lambda s: "\x00" not in s)))
def test_model_and_cluster_arguments(kind, value) -> None:
    from planner.intake.models import PRESETS
    from profiles import list_clusters

    names = set(PRESETS) | {c.name.lower() for c in list_clusters()}
    if value.strip().lower() in names:  # hypothesis found a real preset: make it unknown
        value = value + "-not-a-preset"
    assert_refused(*_argv("estimate", {kind: value}))


@settings(FUZZ, max_examples=20)
@given(name=st.sampled_from(["/dev/null", "/dev/full", "/", "/nonexistent-dir/out.json", "link"]))
def test_outputs_that_are_not_regular_files(tmp_path_factory, good_plan_file, name) -> None:
    folder = tmp_path_factory.mktemp("out")
    if name == "link":
        os.symlink("/dev/null", folder / "link")
        name = str(folder / "link")
    assert_refused("export", str(good_plan_file), "--to", "megatron", "-o", name)
    assert_refused("report", str(good_plan_file), "-o", name + ".md" if name.startswith("/nonexistent") else name)
    assert os.path.islink(folder / "link") or not (folder / "link").exists()
