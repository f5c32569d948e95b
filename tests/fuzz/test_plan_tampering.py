"""Tampered plans: every command that reads a plan refuses them with exit 2, one line, nothing
executed and nothing written (hypothesis over the fields the validator checks)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzkit import FUZZ, refused_everywhere

INTS = st.one_of(st.integers(-(10**30), -1), st.just(0), st.integers(10**6, 10**30), st.integers(2, 7))
"""Replacements for a count: negative, zero, absurd, or a small wrong value."""
PATHS = [
    ("mesh", "tp"), ("mesh", "pp"), ("mesh", "dp"), ("config", "tp"), ("config", "pp"), ("config", "cp"), ("config", "dp"),
    ("config", "micro_batch"), ("config", "global_batch"), ("request", "gpus"), ("schedule", "num_microbatches"),
    ("schedule", "micro_batch"), ("schedule", "virtual_stages"), ("mesh", "nodes"), ("cluster", "gpus_per_node"),
]


def _write(tmp_path: Path, data: Any) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@settings(FUZZ, max_examples=40)
@given(where=st.sampled_from(PATHS), value=INTS)
def test_tampered_degrees_and_batch(tmp_path_factory, good_plan, where, value) -> None:
    data = copy.deepcopy(good_plan)
    section, key = where
    if data[section][key] == value:
        value += 1
    data[section][key] = value
    refused_everywhere(_write(tmp_path_factory.mktemp("t"), data))


@settings(FUZZ, max_examples=30)
@given(stage=st.integers(0, 1), edit=st.sampled_from(["drop", "repeat", "negative", "huge", "swap", "recompute", "empty"]))
def test_tampered_stages(tmp_path_factory, good_plan, stage, edit) -> None:
    data = copy.deepcopy(good_plan)
    layers = data["stages"][stage]["layers"]
    if edit == "drop":
        layers.pop()
    elif edit == "repeat":
        layers.append(layers[-1])
    elif edit == "negative":
        layers[0] = -layers[0] - 1
    elif edit == "huge":
        layers[-1] = 10**12
    elif edit == "swap":
        layers[0], layers[1] = layers[1], layers[0]
    elif edit == "recompute":
        data["stages"][stage]["layer_recompute"].append("full")
    else:
        data["stages"][stage]["layers"] = []
    refused_everywhere(_write(tmp_path_factory.mktemp("t"), data))


@settings(FUZZ, max_examples=20)
@given(arg=st.sampled_from(["{d}/evil.py:make", "os:system", "evil_module:factory", "{d}/config.json"]), keep_spec=st.booleans())
def test_a_plan_naming_code_never_runs_it(tmp_path_factory, good_plan, arg, keep_spec) -> None:
    folder = tmp_path_factory.mktemp("evil")
    marker = folder / "ran"
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\ndef make():\n    raise SystemExit(0)\n")
    data = copy.deepcopy(good_plan)
    data["model"]["arg"] = arg.format(d=folder)
    if keep_spec:  # a layer list that does not hash to the digest: the plan was edited
        from planner.intake.models import resolve_model

        spec = resolve_model("llama3.1-8b").model_dump(mode="json")
        spec["layers"][1]["hidden_size"] = 8192
        data["model"]["spec"] = spec
    refused_everywhere(_write(folder, data))
    assert not marker.exists(), "reading the plan ran the file it names"


@settings(FUZZ, max_examples=20)
@given(field=st.sampled_from(["step_time_s", "peak_memory_gib", "mfu", "tokens_per_s"]), factor=st.sampled_from([0.5, 2.0, -1.0, 1e300]))
def test_tampered_estimate(tmp_path_factory, good_plan, field, factor) -> None:
    data = copy.deepcopy(good_plan)
    data["estimate"][field] *= factor
    refused_everywhere(_write(tmp_path_factory.mktemp("t"), data))


def test_the_untampered_plan_is_valid(good_plan_file) -> None:
    """The fixture every tampering starts from passes every command (so each refusal is the tampering's)."""
    from fuzzkit import run_cli

    for argv in (["validate", str(good_plan_file)], ["export", str(good_plan_file), "--to", "megatron"], ["check-memory", str(good_plan_file), "--help"]):
        code, _, err = run_cli(*argv)
        assert code == 0, err
