"""profiles.entries and profiles.errors: JSON entry -> spec, name handling, message shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from costmodel.specs import GPUSpec
from profiles import ProfileError, list_clusters, list_gpus, load_cluster
from profiles import loader
from profiles.entries import GpuEntry, build_cluster, build_gpu, did_you_mean, normalize_name

GPU = {"peak_bf16_tflops": 100, "hbm_gib": 40, "hbm_bandwidth_gbps": 1000}


def _no_gpus(name: str, where: str) -> GpuEntry:
    raise AssertionError(f"unexpected GPU lookup of {name} at {where}")


def test_profile_error_is_a_value_error_with_one_line() -> None:
    error = ProfileError("first line\n  second line")
    assert isinstance(error, ValueError)
    assert str(error) == "first line second line"


def test_names_normalize_case_spaces_and_underscores() -> None:
    assert normalize_name("  NVIDIA H100 80GB HBM3 ") == "nvidia-h100-80gb-hbm3"
    assert normalize_name("DGX_A100") == "dgx-a100"


def test_suggestions_keep_three_distinct_names() -> None:
    assert did_you_mean([]) == ""
    assert did_you_mean(["a", "b", "a", "c", "d"]) == " (did you mean a, b, c?)"


def test_a_packaged_gpu_takes_its_key_as_name_and_keeps_its_metadata() -> None:
    raw = {**GPU, "efficiency": {"gemm_max": 0.5}, "aliases": ["My GPU"], "default_cluster": "x",
           "sources": {"hbm_gib": "datasheet"}}
    entry = build_gpu(raw, "here", name="g1")
    assert entry.spec == GPUSpec(name="g1", **GPU)
    assert (entry.efficiency, entry.aliases, entry.default_cluster) == ({"gemm_max": 0.5}, ("my-gpu",), "x")
    assert entry.sources == {"hbm_gib": "datasheet"}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"aliases": "h100"}, "here: field 'aliases' must be a list of strings"),
        ({"default_cluster": 3}, "here: field 'default_cluster' must be a preset name string"),
        ({"hbm_gib": "lots"}, "here: field 'hbm_gib': Input should be a valid number"),
    ],
)
def test_bad_gpu_metadata_is_named(extra: dict[str, Any], expected: str) -> None:
    with pytest.raises(ProfileError) as caught:
        build_gpu({**GPU, **extra}, "here", name="g1")
    assert str(caught.value).startswith(expected)


def test_a_cluster_reports_every_problem_at_once() -> None:
    raw = {"gpu": {"name": "g", **GPU}, "gpus_per_node": -1, "efficiency": {}}
    with pytest.raises(ProfileError) as caught:
        build_cluster(raw, "there", "c", _no_gpus)
    message = str(caught.value)
    assert message.startswith("there: ")
    assert "field 'gpus_per_node'" in message and "missing field 'network_latency_us'" in message
    assert "missing field 'efficiency.network'" in message


def test_a_broken_packaged_file_names_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "_packaged_text", lambda filename: "{broken")
    with pytest.raises(ProfileError, match=r"^profiles/gpus.json is not valid JSON"):
        list_gpus()


def test_a_preset_may_not_carry_its_own_name(monkeypatch: pytest.MonkeyPatch) -> None:
    real = loader._packaged_text
    clusters = json.loads(real("clusters.json"))
    clusters["clusters"]["dgx-a100"]["name"] = "other"
    monkeypatch.setattr(loader, "_packaged_text", lambda f: json.dumps(clusters) if f == "clusters.json" else real(f))
    with pytest.raises(ProfileError, match="cluster preset 'dgx-a100'.*remove field 'name'"):
        load_cluster("dgx-a100")


def test_gpu_names_and_aliases_are_unique() -> None:
    raw = json.loads(loader._packaged_text("gpus.json"))["gpus"]
    spellings = [normalize_name(n) for n in raw] + [normalize_name(a) for e in raw.values() for a in e["aliases"]]
    assert len(spellings) == len(set(spellings))
    preset_names = {cluster.name for cluster in list_clusters()}
    assert not set(spellings) & preset_names  # a GPU name never shadows a cluster preset
